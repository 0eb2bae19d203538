import Foundation

#if canImport(Glibc)
import Glibc
#endif

/// Writes export files into one chosen folder and nowhere else.
///
/// File names are the writer's own (`reps.csv`, `vbt-export.json`), never taken
/// from data; the folder is resolved once (symbolic links followed) and every
/// file is opened relative to it with `O_NOFOLLOW`, so neither a `..` nor a
/// symbolic link planted in the folder can send a write outside it.
public final class ExportFolder {
    /// The folder, resolved.
    public let path: String
    private let descriptor: Int32

    /// Opens (creating if needed) `folder`.
    public init(_ folder: String) throws(StoreError) {
        guard !folder.isEmpty else { throw StoreError(.invalid, "--out is empty: name the folder to export into") }
        var isDirectory: ObjCBool = false
        if FileManager.default.fileExists(atPath: folder, isDirectory: &isDirectory), !isDirectory.boolValue {
            throw StoreError(.invalid, "--out \(folder) is a file: name a folder (it is created if missing)")
        }
        do { try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true) } catch {
            throw StoreError(.invalid, "cannot create the folder \(folder): \(error.localizedDescription)")
        }
        guard let resolved = realpath(folder, nil) else { throw StoreError(.invalid, "cannot resolve the folder \(folder)") }
        path = String(cString: resolved)
        free(resolved)
        descriptor = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        guard descriptor >= 0 else { throw StoreError(.invalid, "cannot open the folder \(path): \(String(cString: strerror(errno)))") }
    }

    deinit { close(descriptor) }

    /// Writes `data` to `name` inside the folder (replacing a regular file of that name).
    public func write(_ name: String, _ data: Data) throws(StoreError) {
        let file = try create(name)
        defer { close(file) }
        var offset = 0
        let ok = data.withUnsafeBytes { buffer -> Bool in
            while offset < buffer.count {
                let written = Glibc.write(file, buffer.baseAddress! + offset, buffer.count - offset)
                if written < 0 {
                    if errno == EINTR { continue }
                    return false
                }
                offset += written
            }
            return true
        }
        guard ok else { throw StoreError(.diskFull, "writing \(path)/\(name) failed: \(String(cString: strerror(errno)))") }
    }

    /// Opens `name` for writing; refuses anything but a plain name and any symbolic link.
    private func create(_ name: String) throws(StoreError) -> Int32 {
        guard !name.isEmpty, !name.contains("/"), name != ".", name != "..", !name.hasPrefix(".") else {
            throw StoreError(.invalid, "refusing to write '\(name)': export files are plain names inside \(path)")
        }
        let file = openat(descriptor, name, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0o644)
        guard file >= 0 else {
            if errno == ELOOP {
                throw StoreError(.invalid, "refusing to write \(path)/\(name): it is a symbolic link (it could point outside the folder); remove it")
            }
            throw StoreError(.invalid, "cannot write \(path)/\(name): \(String(cString: strerror(errno)))")
        }
        return file
    }
}

/// Turns table pages into export files.
public enum ExportFormat: String, Sendable, CaseIterable {
    case json, csv

    /// The CSV text of a table: a header row, then one line per row (RFC 4180,
    /// CRLF); with `bom`, a UTF-8 byte order mark first, so spreadsheets read
    /// non-ASCII names right.
    public static func csv(columns: [String], rows: [[Cell]], bom: Bool = false) -> Data {
        var text = (bom ? "\u{FEFF}" : "") + columns.joined(separator: ",") + "\r\n"
        for row in rows { text += row.map(\.csv).joined(separator: ",") + "\r\n" }
        return Data(text.utf8)
    }

    /// Whether `column` holds Unix seconds (proto/query.md: `ts`, `*_ts`, `t_end`).
    static func isTime(_ column: String) -> Bool { column == "ts" || column.hasSuffix("_ts") || column == "t_end" }

    /// The table with each time column followed by `<column>_iso`: the same
    /// instant in ISO 8601 (UTC, milliseconds), for people and spreadsheets.
    public static func withISOTimes(columns: [String], rows: [[Cell]]) -> (columns: [String], rows: [[Cell]]) {
        let times = columns.indices.filter { isTime(columns[$0]) }
        guard !times.isEmpty else { return (columns, rows) }
        var outColumns: [String] = []
        for (index, column) in columns.enumerated() {
            outColumns.append(column)
            if times.contains(index) { outColumns.append(column + "_iso") }
        }
        let formatter = ISO8601DateFormatter()
        formatter.formatOptions = [.withInternetDateTime, .withFractionalSeconds]
        formatter.timeZone = TimeZone(identifier: "UTC")
        let outRows = rows.map { row in
            var out: [Cell] = []
            for (index, cell) in row.enumerated() {
                out.append(cell)
                guard times.contains(index) else { continue }
                switch cell {
                case .real(let seconds): out.append(.text(formatter.string(from: Date(timeIntervalSince1970: seconds))))
                case .int(let seconds): out.append(.text(formatter.string(from: Date(timeIntervalSince1970: Double(seconds)))))
                default: out.append(.null)
                }
            }
            return out
        }
        return (outColumns, outRows)
    }

    /// A table as a JSON array of objects, one per row, keyed by column.
    public static func jsonObjects(columns: [String], rows: [[Cell]]) -> [[String: Cell]] {
        rows.map { Dictionary(uniqueKeysWithValues: zip(columns, $0)) }
    }
}
