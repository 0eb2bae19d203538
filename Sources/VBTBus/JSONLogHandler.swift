import Foundation
import Logging
import VBTWire

// Log records as JSON lines, for journald and log shippers (`--log-format json`,
// or VBT_LOG_FORMAT=json). swift-log itself ships only a text handler
// (StreamLogHandler), and no package in the machine's mirror writes JSON lines,
// so this one is written here, on the project's own JSON writer: one object a
// line on stderr, {"ts", "level", "label", "source", "message", and the
// record's metadata as string fields under "metadata"}.

/// The format of the programs' log lines.
public enum LogFormat: String, CaseIterable, Sendable {
    /// swift-log's text lines: `<time> <level> <label>: <metadata> [<source>] <message>`.
    case text
    /// One JSON object a line.
    case json

    /// `VBT_LOG_FORMAT`, else text.
    public static var fromEnvironment: LogFormat { environment("VBT_LOG_FORMAT").flatMap { LogFormat(rawValue: $0.lowercased()) } ?? .text }
}

/// Writes each record as one JSON line to stderr.
public struct JSONLogHandler: LogHandler {
    public var logLevel: Logger.Level = .info
    public var metadata: Logger.Metadata = [:]
    public var metadataProvider: Logger.MetadataProvider?
    private let label: String
    private let write: @Sendable ([UInt8]) -> Void

    /// A handler for `label` writing to stderr (or to `write`, in tests).
    public init(label: String, write: @escaping @Sendable ([UInt8]) -> Void = JSONLogHandler.standardError) {
        self.label = label
        self.write = write
    }

    public subscript(metadataKey key: String) -> Logger.Metadata.Value? {
        get { metadata[key] }
        set { metadata[key] = newValue }
    }

    public func log(event: LogEvent) {
        var merged = metadata
        if let provided = metadataProvider?.get() { merged.merge(provided) { _, new in new } }
        if let explicit = event.metadata { merged.merge(explicit) { _, new in new } }
        if let error = event.error { merged["error"] = "\(error)" }
        let (level, message, source) = (event.level, event.message, event.source)
        var json = JSONWriter(capacity: 256)
        json.beginObject()
        json.key("ts")
        json.string(Self.timestamp(Date()))
        json.key("level")
        json.string(level.rawValue)
        json.key("label")
        json.string(label)
        json.key("source")
        json.string(source)
        json.key("message")
        json.string(message.description)
        if !merged.isEmpty {
            json.key("metadata")
            json.beginObject()
            for (key, value) in merged.sorted(by: { $0.key < $1.key }) {
                json.key(key)
                json.string("\(value)")
            }
            json.endObject()
        }
        json.endObject()
        write(json.bytes + [UInt8(ascii: "\n")])
    }

    /// ISO 8601 UTC with milliseconds, e.g. `2026-11-26T09:30:50.123Z`.
    static func timestamp(_ date: Date) -> String {
        date.formatted(Date.ISO8601FormatStyle(includingFractionalSeconds: true))
    }

    /// Writes a whole line to stderr at once (lines from several threads never interleave).
    public static let standardError: @Sendable ([UInt8]) -> Void = { bytes in
        bytes.withUnsafeBytes { buffer in
            var offset = 0
            while offset < buffer.count {
                let written = Foundation.write(2, buffer.baseAddress! + offset, buffer.count - offset)
                if written <= 0 { return }
                offset += written
            }
        }
    }
}
