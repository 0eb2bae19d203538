import CZlib
import Foundation
import VBTWire

#if canImport(Glibc)
import Glibc
#endif

/// Writes a recording (proto/README.md, "Recordings"): JSON Lines, one bus message a
/// line, `{"t": <seconds since the first line>, "topic": ..., "msg": {...}}`.
/// The JSON frame is stored verbatim as received. A path ending in `.gz` is written
/// gzip-compressed (zlib); every reader takes both.
public final class RecordingWriter {
    private enum Sink {
        case plain(UnsafeMutablePointer<FILE>)
        case gzip(gzFile)
    }
    private let sink: Sink
    private var firstReceived: Double?
    /// Lines written so far.
    public private(set) var lines = 0

    /// Creates (or truncates) `path`; gzip-compressed when it ends in `.gz`.
    public init(path: String) throws(RecordingError) {
        if path.hasSuffix(".gz") {
            // Level 6, zlib's default balance of size and speed.
            guard let file = gzopen(path, "wb6") else {
                throw RecordingError("cannot write \(path): \(String(cString: strerror(errno))); check the folder exists and is writable")
            }
            sink = .gzip(file)
        } else {
            guard let file = fopen(path, "w") else {
                throw RecordingError("cannot write \(path): \(String(cString: strerror(errno))); check the folder exists and is writable")
            }
            sink = .plain(file)
        }
    }

    deinit { close() }

    /// Appends one message received at monotonic time `receivedAt`.
    public func append(_ message: BusMessage, receivedAt: Double) throws(RecordingError) {
        let origin = firstReceived ?? receivedAt
        firstReceived = origin
        var writer = JSONWriter(capacity: message.body.count + 64)
        writer.beginObject()
        writer.key("t"); writer.fixed(receivedAt - origin, decimals: 6)
        writer.key("topic"); writer.string(message.topic)
        writer.key("msg"); writer.raw(message.body)
        writer.endObject()
        var bytes = writer.bytes
        bytes.append(0x0A)
        let written: Int
        switch sink {
        case .plain(let file): written = bytes.withUnsafeBytes { fwrite($0.baseAddress, 1, $0.count, file) }
        case .gzip(let file): written = Int(bytes.withUnsafeBytes { gzwrite(file, $0.baseAddress, UInt32($0.count)) })
        }
        if written != bytes.count {
            throw RecordingError("write failed: \(String(cString: strerror(errno))); is the disk full?")
        }
        lines += 1
    }

    /// Pushes buffered lines to the kernel (a compressed recording: a flush point
    /// every reader can decompress up to, at a small cost in size).
    public func flush() {
        switch sink {
        case .plain(let file): fflush(file)
        case .gzip(let file): gzflush(file, Z_SYNC_FLUSH)
        }
    }

    private var closed = false

    /// Flushes, syncs to disk and closes; later calls do nothing.
    public func close() {
        guard !closed else { return }
        closed = true
        switch sink {
        case .plain(let file):
            fflush(file)
            fsync(fileno(file))
            fclose(file)
        case .gzip(let file):
            gzclose(file)
        }
    }
}

/// A recording that cannot be written or read, saying what to do.
public struct RecordingError: Error, Sendable, CustomStringConvertible {
    /// What went wrong and what to do.
    public let message: String
    /// Creates an error.
    public init(_ message: String) { self.message = message }
    public var description: String { message }
}

/// A value kept in a JSON file (stats, pattern libraries, calibration stores):
/// saved atomically, so a reader never sees half a file, and loaded as the
/// empty value when the file does not exist yet.
public protocol JSONFileStored: Codable {
    /// The empty value.
    init()
}

extension JSONFileStored {
    /// Loads `path`; an absent file gives the empty value.
    public static func load(path: String) throws -> Self {
        guard FileManager.default.fileExists(atPath: path) else { return Self() }
        return try JSONDecoder().decode(Self.self, from: Data(contentsOf: URL(fileURLWithPath: path)))
    }

    /// Saves atomically to `path`, creating its folder.
    public func save(path: String) throws {
        let url = URL(fileURLWithPath: path)
        try FileManager.default.createDirectory(at: url.deletingLastPathComponent(), withIntermediateDirectories: true)
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .prettyPrinted]
        var data = try encoder.encode(self)
        data.append(0x0A)
        try data.write(to: url, options: .atomic)
    }
}

extension SubscriberStats: JSONFileStored {
    /// Writes the stats as JSON to `path` atomically.
    public func write(toPath path: String) throws { try save(path: path) }
}
