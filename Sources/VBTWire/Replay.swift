// The replay protocol's request and reply header (proto/replay.md).

/// A request for a range of one stream.
public struct ReplayRequest: Sendable, Equatable {
    public var id: String
    public var src: String
    public var from: Int
    public var to: Int

    /// Creates a request.
    public init(id: String, src: String, from: Int, to: Int) { (self.id, self.src, self.from, self.to) = (id, src, from, to) }

    /// Reads a request frame, naming what is wrong.
    public init(json bytes: [UInt8]) throws(PayloadError) {
        let value: JSONValue
        do { value = try JSONParser.parse(bytes) } catch { throw PayloadError("a replay request is one JSON object {id, src, from, to}: \(error)") }
        guard case .object(let fields) = value else { throw PayloadError("a replay request is one JSON object {id, src, from, to}") }
        id = try fields.string("id")
        src = try fields.string("src")
        from = try fields.integer("from")
        to = try fields.integer("to")
        guard from >= 1, to >= from else { throw PayloadError("from and to are seq numbers, 1 <= from <= to") }
        guard to <= 9_007_199_254_740_991 else { throw PayloadError("to must be at most 2^53 - 1") }
    }

    /// The request frame.
    public var json: [UInt8] {
        var writer = JSONWriter()
        writer.beginObject()
        writer.field("id", id)
        writer.field("src", src)
        writer.field("from", from)
        writer.field("to", to)
        writer.endObject()
        return writer.bytes
    }
}

/// The first frame of a reply: what follows, and what the journal holds.
public struct ReplayHeader: Sendable, Equatable {
    public var id: String
    public var src: String
    public var from: Int
    public var to: Int
    /// Messages (topic and body frame pairs) after the header.
    public var count: Int
    /// The first and last seq of `src` the journal holds; nil when it holds none.
    public var keptFrom: Int?
    public var keptTo: Int?
    /// The reply stopped at its limit: ask again from the last seq received + 1.
    public var more: Bool
    /// Set instead of the rest for a request that could not be read.
    public var error: String?

    /// Creates a header.
    public init(id: String, src: String, from: Int, to: Int, count: Int, keptFrom: Int?, keptTo: Int?, more: Bool, error: String? = nil) {
        (self.id, self.src, self.from, self.to, self.count) = (id, src, from, to, count)
        (self.keptFrom, self.keptTo, self.more, self.error) = (keptFrom, keptTo, more, error)
    }

    /// The last seq of `asked` that is lost when the reply lacks it. Without
    /// `more`, every asked seq that did not come is gone; with it, only those
    /// below the journal's start. For a stream its producer is still
    /// publishing (`live`), nothing past the journal's end is lost: it has not
    /// been published yet (a hole up there comes from a forged or corrupt seq).
    public func lostThrough(asked: ClosedRange<UInt64>, live: Bool) -> UInt64 {
        if more { return min(asked.upperBound, UInt64(max(keptFrom ?? 0, 1)) - 1) }
        if live, let keptTo, keptTo >= 0 { return min(asked.upperBound, UInt64(keptTo)) }
        return asked.upperBound
    }

    /// Reads a header frame.
    public init(json bytes: [UInt8]) throws(PayloadError) {
        let value: JSONValue
        do { value = try JSONParser.parse(bytes) } catch { throw PayloadError("a replay reply's header is one JSON object: \(error)") }
        guard case .object(let fields) = value else { throw PayloadError("a replay reply's header is one JSON object") }
        id = try fields.string("id")
        error = try fields.optionalString("error")
        src = try fields.optionalString("src") ?? ""
        from = try fields.optionalInteger("from") ?? 0
        to = try fields.optionalInteger("to") ?? 0
        count = try fields.optionalInteger("count") ?? 0
        keptFrom = try fields.optionalInteger("kept_from")
        keptTo = try fields.optionalInteger("kept_to")
        more = fields["more"] == .bool(true)
    }

    /// The header frame.
    public var json: [UInt8] {
        var writer = JSONWriter()
        writer.beginObject()
        writer.field("id", id)
        if let error {
            writer.field("error", error)
        } else {
            writer.field("src", src)
            writer.field("from", from)
            writer.field("to", to)
            writer.field("count", count)
            if let keptFrom, let keptTo {
                writer.field("kept_from", keptFrom)
                writer.field("kept_to", keptTo)
            }
            writer.key("more"); writer.bool(more)
        }
        writer.endObject()
        return writer.bytes
    }

    /// How many of the wanted seqs are beyond the journal's retention (lost for good).
    public var lost: Int {
        guard error == nil else { return 0 }
        guard let keptFrom else { return to - from + 1 }
        return max(0, min(to, keptFrom - 1) - from + 1)
    }
}
