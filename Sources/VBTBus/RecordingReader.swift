import CZlib
import Foundation
import VBTWire

/// Reads recordings (proto/README.md, "Recordings") written by `RecordingWriter`.
public enum RecordingReader {
    /// Parses one recording line `{"t": ..., "topic": ..., "msg": {...}}`; the
    /// message goes through `decodeMessage`, so a line a live subscriber would
    /// refuse is refused here too.
    public static func parse(line: [UInt8]) throws(MalformedMessage) -> (t: Double, message: BusMessage) {
        let value: JSONValue
        do { value = try JSONParser.parse(line) } catch { throw MalformedMessage(.notJSON, error.description) }
        guard case .object(let object) = value else { throw MalformedMessage(.notObject, "a recording line must be an object") }
        guard case .number(let t)? = object["t"], t.isFinite, t >= 0 else {
            throw MalformedMessage(.missingField, "t (seconds since the first line, a number >= 0)")
        }
        guard case .string(let topic)? = object["topic"] else { throw MalformedMessage(.missingField, "topic (a string)") }
        guard case .object(let msg)? = object["msg"] else { throw MalformedMessage(.missingField, "msg (the message object)") }
        // The frame is written back out as it was parsed: the writer keeps every field and its order.
        var writer = JSONWriter(capacity: 256)
        writer.value(.object(msg))
        return (t, try decodeMessage(topic: Array(topic.utf8), body: writer.bytes))
    }

    /// Reads every line of `path` in file order; blank lines are skipped,
    /// unusable ones are returned with their line numbers (never thrown).
    public static func read(path: String) throws(RecordingError) -> (lines: [RecordedLine], unreadable: [UnreadableLine]) {
        var lines: [RecordedLine] = []
        var unreadable: [UnreadableLine] = []
        try forEachLine(path: path) { line in
            switch line {
            case .success(let line): lines.append(line)
            case .failure(let bad): unreadable.append(bad)
            }
        }
        return (lines, unreadable)
    }

    /// Reads the lines of a recording held in memory.
    public static func read(bytes: [UInt8]) -> (lines: [RecordedLine], unreadable: [UnreadableLine]) {
        var lines: [RecordedLine] = []
        var unreadable: [UnreadableLine] = []
        forEachLine(bytes: bytes) { line in
            switch line {
            case .success(let line): lines.append(line)
            case .failure(let bad): unreadable.append(bad)
            }
        }
        return (lines, unreadable)
    }

    /// Hands each non-blank line of `path` to `body` in file order, parsed or
    /// with why not, without keeping the parsed messages (a long recording
    /// is held once, as bytes).
    public static func forEachLine(path: String, _ body: (Result<RecordedLine, UnreadableLine>) -> Void) throws(RecordingError) {
        forEachLine(bytes: try contents(path: path), body)
    }

    /// The bytes of a recording, decompressed when it is gzip (zlib reads a plain file as it is).
    public static func contents(path: String) throws(RecordingError) -> [UInt8] {
        guard let file = gzopen(path, "rb") else {
            throw RecordingError("cannot read recording \(path): check the path (make one with `vbt record --out FILE`)")
        }
        defer { gzclose(file) }
        var bytes: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 1 << 16)
        while true {
            let count = chunk.withUnsafeMutableBytes { gzread(file, $0.baseAddress, UInt32($0.count)) }
            if count < 0 {
                var code: Int32 = 0
                let message = gzerror(file, &code).map { String(cString: $0) } ?? "unknown"
                // Cut short (a recorder killed mid-write): what came before is the recording.
                if code == Z_BUF_ERROR { break }
                throw RecordingError("cannot read recording \(path): \(message); is it a recording (JSON Lines, or gzip of them)?")
            }
            if count == 0 { break }
            bytes.append(contentsOf: chunk[..<Int(count)])
        }
        return bytes
    }

    /// Hands each non-blank line of a recording held in memory to `body`.
    public static func forEachLine(bytes: [UInt8], _ body: (Result<RecordedLine, UnreadableLine>) -> Void) {
        for (index, line) in bytes.split(separator: 0x0A, omittingEmptySubsequences: false).enumerated() {
            if line.allSatisfy({ $0 == 0x20 || $0 == 0x0D || $0 == 0x09 }) { continue }
            do {
                let (t, message) = try parse(line: Array(line))
                body(.success(RecordedLine(number: index + 1, t: t, message: message)))
            } catch {
                body(.failure(UnreadableLine(number: index + 1, reason: error.description)))
            }
        }
    }
}
