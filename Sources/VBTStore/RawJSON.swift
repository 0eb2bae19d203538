/// Byte ranges inside a JSON text that the bus reader has already validated.
///
/// The recorder stores each raw reading as the JSON the bridge sent. Slicing
/// it out of the received frame, instead of writing the parsed value out
/// again, keeps the reading byte for byte and skips formatting every number
/// (which was half the cost of storing a reading).
enum RawJSON {
    /// The ranges of the elements of the array under top-level `key`, or nil
    /// when there is no such array. `bytes` must be valid JSON (unchecked here).
    static func arrayElements(_ bytes: [UInt8], key: String) -> [Range<Int>]? {
        let quotedKey = Array("\"\(key)\"".utf8)
        return bytes.withUnsafeBufferPointer { buffer -> [Range<Int>]? in
            var depth = 0
            var index = 0
            let count = buffer.count
            // Find the key at depth 1, outside strings: a string right after `{` or `,` (a value
            // that happens to read "samples", a station's name say, is not the key).
            var arrayStart = -1
            var keyPosition = false
            while index < count {
                let byte = buffer[index]
                if byte == UInt8(ascii: "\"") {
                    let start = index
                    let isKey = keyPosition
                    keyPosition = false
                    index = skipString(buffer, from: index)
                    if isKey, depth == 1, index - start == quotedKey.count,
                        quotedKey.withUnsafeBufferPointer({ key in
                            (0..<key.count).allSatisfy { buffer[start + $0] == key[$0] }
                        })
                    {
                        var next = index
                        while next < count, buffer[next] != UInt8(ascii: ":") { next += 1 }
                        next += 1
                        while next < count, isSpace(buffer[next]) { next += 1 }
                        guard next < count, buffer[next] == UInt8(ascii: "[") else { return nil }
                        arrayStart = next
                        break
                    }
                    continue
                }
                if byte == UInt8(ascii: "{") || byte == UInt8(ascii: "[") { depth += 1 }
                if byte == UInt8(ascii: "}") || byte == UInt8(ascii: "]") { depth -= 1 }
                if byte == UInt8(ascii: "{") || byte == UInt8(ascii: ",") { keyPosition = true } else if !isSpace(byte) { keyPosition = false }
                index += 1
            }
            guard arrayStart >= 0 else { return nil }
            // Split the array's elements at depth 0 commas.
            var ranges: [Range<Int>] = []
            index = arrayStart + 1
            depth = 0
            var elementStart = -1
            while index < count {
                let byte = buffer[index]
                if byte == UInt8(ascii: "\"") {
                    if elementStart < 0 { elementStart = index }
                    index = skipString(buffer, from: index)
                    continue
                }
                if depth == 0 && (byte == UInt8(ascii: ",") || byte == UInt8(ascii: "]")) {
                    if elementStart >= 0 {
                        var end = index
                        while end > elementStart, isSpace(buffer[end - 1]) { end -= 1 }
                        ranges.append(elementStart..<end)
                    }
                    if byte == UInt8(ascii: "]") { return ranges }
                    elementStart = -1
                } else if !isSpace(byte) {
                    if elementStart < 0 { elementStart = index }
                    if byte == UInt8(ascii: "{") || byte == UInt8(ascii: "[") { depth += 1 }
                    if byte == UInt8(ascii: "}") || byte == UInt8(ascii: "]") { depth -= 1 }
                }
                index += 1
            }
            return nil
        }
    }

    /// The index just past the string starting at `start` (a quote).
    @inline(__always)
    private static func skipString(_ buffer: UnsafeBufferPointer<UInt8>, from start: Int) -> Int {
        var index = start + 1
        while index < buffer.count {
            let byte = buffer[index]
            if byte == UInt8(ascii: "\\") { index += 2; continue }
            index += 1
            if byte == UInt8(ascii: "\"") { return index }
        }
        return index
    }

    @inline(__always)
    private static func isSpace(_ byte: UInt8) -> Bool {
        byte == 0x20 || byte == 0x0A || byte == 0x0D || byte == 0x09
    }
}
