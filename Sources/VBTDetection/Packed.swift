import Foundation

// How a station's reading buffers are kept in a checkpoint or a hand-over.
//
// Written by hand because a checkpoint is a whole gym's detector state, every
// two seconds: each reading as an object of named numbers made it tens of MB
// and a fifth of the rep-detector's CPU (docs/decisions/0035-detector-memory-and-checkpoints.md). Packed
// as bytes, the same doubles are a copy and a base64 pass, and each one reads
// back bit for bit (NaN and infinities included).

/// Rows of doubles, `width` to a row, as their IEEE 754 bytes (little-endian;
/// base64 in JSON, Foundation's encoding of `Data`).
struct PackedRows: Codable, Equatable {
    /// Doubles per row.
    var width: Int
    /// The rows' doubles in order, 8 bytes each.
    var bytes: Data

    private enum CodingKeys: String, CodingKey {
        case width = "w"
        case bytes = "f64le"
    }

    /// Packs `rows`, each written as `width` doubles by `write`.
    init<Rows: Collection>(_ rows: Rows, width: Int, _ write: (Rows.Element, inout [Double]) -> Void) {
        var values: [Double] = []
        values.reserveCapacity(rows.count * width)
        for row in rows { write(row, &values) }
        precondition(values.count == rows.count * width, "each row packs \(width) doubles")
        self.width = width
        bytes = values.map { $0.bitPattern.littleEndian }.withUnsafeBytes { Data($0) }
    }

    init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        width = try container.decode(Int.self, forKey: .width)
        bytes = try container.decode(Data.self, forKey: .bytes)
        guard width > 0, width <= 1 << 20, bytes.count % (8 * width) == 0 else {
            throw DecodingError.dataCorruptedError(
                forKey: .bytes, in: container, debugDescription: "\(bytes.count) bytes are not whole rows of \(width) doubles")
        }
    }

    /// The rows, each read from its doubles by `read`.
    func rows<Row>(_ read: (UnsafeBufferPointer<Double>) -> Row) -> [Row] {
        let values = bytes.withUnsafeBytes { raw in
            (0..<raw.count / 8).map { Double(bitPattern: UInt64(littleEndian: raw.loadUnaligned(fromByteOffset: $0 * 8, as: UInt64.self))) }
        }
        return values.withUnsafeBufferPointer { all in
            stride(from: 0, to: all.count, by: width).map { read(UnsafeBufferPointer(rebasing: all[$0..<$0 + width])) }
        }
    }
}

extension KeyedDecodingContainer {
    /// Rows of `width` doubles written packed (`PackedRows`), or as an array
    /// of objects by an earlier version (a checkpoint left by it, or a
    /// hand-over from it).
    func decodeRows<Row: Decodable>(_ key: Key, width: Int, _ read: (UnsafeBufferPointer<Double>) -> Row) throws -> [Row] {
        let packed: PackedRows
        do {
            packed = try decode(PackedRows.self, forKey: key)
        } catch DecodingError.typeMismatch {
            return try decode([Row].self, forKey: key)
        }
        guard packed.width == width else {
            throw DecodingError.dataCorruptedError(forKey: key, in: self, debugDescription: "rows of \(packed.width) doubles, not \(width)")
        }
        return packed.rows(read)
    }
}
