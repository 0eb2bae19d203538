// A payload's fields declared once, as a table: each row names the wire key, the property it
// fills and its kind, and the decoder, the encoder, their error texts and the recorder's columns
// all come from the rows. Rules that span fields stay explicit beside the table. For payloads off
// the hot path (a rep, a few a minute per station): a row costs a closure call, which a sample's
// hand-written codec does not pay.

/// A value a table row hands the recorder for its column, whatever the store.
public enum ColumnValue: Sendable, Equatable {
    case null
    case integer(Int)
    case real(Double)
    case text(String)
}

/// The property a row of `P`'s table fills (Sendable, so the table is).
public typealias FieldPath<P, Value> = any WritableKeyPath<P, Value> & Sendable

/// One field of a payload `P`: its wire key, how it is read, written and stored.
public struct PayloadField<P>: Sendable {
    /// Where a field is stored by the recorder.
    public enum Column: Sendable, Equatable {
        /// In the column named like the wire key.
        case key
        /// In a column of another name.
        case named(String)
        /// Not stored.
        case none
    }

    /// The wire key.
    public let key: StaticString
    /// The recorder's column, nil when the field is not stored.
    public let column: String?
    let read: @Sendable (inout P, JSONObject) throws(PayloadError) -> Void
    let write: @Sendable (P, inout JSONWriter) -> Void
    /// The field's value for its column (`null` when absent).
    public let stored: @Sendable (P) -> ColumnValue

    init(
        _ key: StaticString, _ column: Column, read: @escaping @Sendable (inout P, JSONObject) throws(PayloadError) -> Void,
        write: @escaping @Sendable (P, inout JSONWriter) -> Void, stored: @escaping @Sendable (P) -> ColumnValue
    ) {
        self.key = key
        switch column {
        case .key: self.column = key.description
        case .named(let name): self.column = name
        case .none: self.column = nil
        }
        (self.read, self.write, self.stored) = (read, write, stored)
    }

    /// A required string.
    public static func string(_ key: StaticString, _ path: FieldPath<P, String>, column: Column = .key) -> Self {
        Self(
            key, column, read: { payload, object throws(PayloadError) in payload[keyPath: path] = try object.string(key.description) },
            write: { payload, writer in writer.field(key, payload[keyPath: path]) }, stored: { .text($0[keyPath: path]) })
    }

    /// An optional string, written only when present.
    public static func optionalString(_ key: StaticString, _ path: FieldPath<P, String?>, column: Column = .key) -> Self {
        Self(
            key, column, read: { payload, object throws(PayloadError) in payload[keyPath: path] = try object.optionalString(key.description) },
            write: { payload, writer in writer.optionalField(key, payload[keyPath: path]) }, stored: { $0[keyPath: path].map { .text($0) } ?? .null })
    }

    /// A required integer.
    public static func integer(_ key: StaticString, _ path: FieldPath<P, Int>, column: Column = .key) -> Self {
        Self(
            key, column, read: { payload, object throws(PayloadError) in payload[keyPath: path] = try object.integer(key.description) },
            write: { payload, writer in writer.field(key, payload[keyPath: path]) }, stored: { .integer($0[keyPath: path]) })
    }

    /// A required number, written in its shortest form or with `decimals` fixed digits (times).
    public static func number(
        _ key: StaticString, _ path: FieldPath<P, Double>, decimals: Int? = nil, column: Column = .key
    ) -> Self {
        Self(
            key, column, read: { payload, object throws(PayloadError) in payload[keyPath: path] = try object.number(key.description) },
            write: { payload, writer in writer.number(key, payload[keyPath: path], decimals: decimals) }, stored: { .real($0[keyPath: path]) })
    }

    /// An optional number, written only when present; `marker` names a flag written `true` just
    /// before it (`late` before `late_s`), which the payload checks after the table.
    public static func optionalNumber(
        _ key: StaticString, _ path: FieldPath<P, Double?>, decimals: Int? = nil, marker: StaticString? = nil,
        column: Column = .key
    ) -> Self {
        Self(
            key, column, read: { payload, object throws(PayloadError) in payload[keyPath: path] = try object.optionalNumber(key.description) },
            write: { payload, writer in
                guard let value = payload[keyPath: path] else { return }
                if let marker { writer.key(marker); writer.bool(true) }
                writer.number(key, value, decimals: decimals)
            }, stored: { $0[keyPath: path].map { .real($0) } ?? .null })
    }

    /// An optional boolean, written only when present; stored as 1 or 0.
    public static func optionalFlag(_ key: StaticString, _ path: FieldPath<P, Bool?>, column: Column = .key) -> Self {
        Self(
            key, column, read: { payload, object throws(PayloadError) in payload[keyPath: path] = try object.optionalFlag(key.description) },
            write: { payload, writer in
                if let value = payload[keyPath: path] { writer.key(key); writer.bool(value) }
            }, stored: { $0[keyPath: path].map { .integer($0 ? 1 : 0) } ?? .null })
    }

    /// An optional array of strings, written only when present; stored comma-separated.
    public static func optionalStrings(_ key: StaticString, _ path: FieldPath<P, [String]?>, column: Column = .key) -> Self {
        Self(
            key, column, read: { payload, object throws(PayloadError) in payload[keyPath: path] = try object.optionalStrings(key.description) },
            write: { payload, writer in
                guard let values = payload[keyPath: path] else { return }
                writer.key(key)
                writer.beginArray()
                for value in values { writer.string(value) }
                writer.endArray()
            }, stored: { $0[keyPath: path].map { .text($0.joined(separator: ",")) } ?? .null })
    }
}

extension Array {
    /// Reads every field of the table into `blank`, in the table's order (so the first field in
    /// that order that is wrong names the error).
    public func read<P>(into blank: P, from object: JSONObject) throws(PayloadError) -> P where Element == PayloadField<P> {
        var payload = blank
        for field in self { try field.read(&payload, object) }
        return payload
    }

    /// Writes every present field of `payload`, in the table's order.
    public func write<P>(_ payload: P, to writer: inout JSONWriter) where Element == PayloadField<P> {
        for field in self { field.write(payload, &writer) }
    }

    /// The rows the recorder stores, in the table's order.
    public func storedColumns<P>() -> [PayloadField<P>] where Element == PayloadField<P> { filter { $0.column != nil } }
}

extension JSONWriter {
    /// Writes `"key":number`, with `decimals` fixed digits when given.
    mutating func number(_ key: StaticString, _ value: Double, decimals: Int?) {
        self.key(key)
        if let decimals { fixed(value, decimals: decimals) } else { number(value) }
    }
}
