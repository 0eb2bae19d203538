import Foundation

// Reading a checkpoint whose state is an array, an element at a time. A thousand stations'
// detector state is a file of some 60 MB; read whole (its bytes, their copy as `Data`, the
// decoded state beside them) it took a restarted rep-detector to 143 MB at its peak, three
// times what it holds once running (docs/performance.md, "The rep-detector's memory").

extension ConsumerCheckpoint {
    /// Reads the checkpoint in `file` as `load` does, its state an element at a time: besides
    /// what is decoded, only one element's bytes and a 64 KiB buffer are in memory. Any file
    /// `load` reads (whatever its keys' order and spacing) reads the same. Nil when there is none.
    public static func loadElements<Element: Codable>(_ file: CheckpointFile) throws -> Self? where State == [Element] {
        try read(file, decodingElements: true)
    }

    /// The checkpoint in `file` with its state left empty (its elements are read past, not
    /// decoded): which of two files is the newer. Nil when there is none.
    static func loadHead<Element: Codable>(_ file: CheckpointFile) throws -> Self? where State == [Element] {
        try read(file, decodingElements: false)
    }

    private static func read<Element: Codable>(_ file: CheckpointFile, decodingElements: Bool) throws -> Self? where State == [Element] {
        let decoder = Self.decoder
        var elements: [Element] = []
        var splitter = StateSplitter()
        let found = try file.readChunks { bytes in
            try splitter.take(bytes, keepingElements: decodingElements) { element in
                elements.append(try decoder.decode(Element.self, from: Data(element)))
            }
        }
        guard found else { return nil }
        // A file whose state the splitter cannot place by its bytes alone (no top-level "state",
        // a top-level key written with escapes, "state" twice) is read whole, as `load` reads it.
        guard splitter.stateSeen, !splitter.needsWholeRead else { return try load(file) }
        // The object with its state emptied: `"state":[]` decodes as no elements.
        var checkpoint = try decoder.decode(Self.self, from: Data(splitter.head))
        checkpoint.state = elements
        return checkpoint
    }
}

/// Splits a checkpoint's JSON as it is read into the object without its state's elements
/// (`head`) and the elements, each handed over whole as soon as it ends. The state is the
/// array that is the value of the top-level key `state`; strings are skipped over (their
/// brackets, commas and escaped quotes are not the structure's).
struct StateSplitter {
    /// The object so far, the state's elements left out (`"state":[]`).
    private(set) var head: [UInt8] = []
    private var element: [UInt8] = []
    private var depth = 0
    private var inString = false
    private var escaped = false
    /// Within the state's brackets.
    private var inState = false
    /// Whether the top-level "state" array was found.
    private(set) var stateSeen = false
    /// Whether a top-level key was written with escapes, or "state" came twice: where the state
    /// is cannot be told from the bytes, and the file is read whole instead.
    private(set) var needsWholeRead = false
    /// Whether the element being read holds more than spacing, and how many have ended.
    private var elementHasContent = false
    private var elementsEnded = 0
    /// At depth 1 the next string is a key (after `{` or `,`); the key read last.
    private var expectingKey = false
    private var readingKey = false
    private var key: [UInt8] = []
    private static let stateKey = Array("state".utf8)

    /// Takes the next `bytes`; `element` gets each element of the state as it ends (its bytes
    /// kept only with `keepingElements`).
    mutating func take(_ bytes: UnsafeBufferPointer<UInt8>, keepingElements: Bool, element ended: ([UInt8]) throws -> Void) throws {
        for byte in bytes {
            if inState {
                try takeInState(byte, keeping: keepingElements, ended)
                continue
            }
            head.append(byte)
            if inString {
                if endsString(byte) {
                    readingKey = false
                    continue
                }
                if readingKey {
                    key.append(byte)
                    if byte == UInt8(ascii: "\\") { needsWholeRead = true }
                }
                continue
            }
            switch byte {
            case UInt8(ascii: "\""):
                inString = true
                if depth == 1, expectingKey {
                    (readingKey, expectingKey) = (true, false)
                    key.removeAll(keepingCapacity: true)
                }
            case UInt8(ascii: "{"), UInt8(ascii: "["):
                depth += 1
                if depth == 1 { expectingKey = byte == UInt8(ascii: "{") }
                if depth == 2, key == Self.stateKey {
                    if stateSeen || byte != UInt8(ascii: "[") { needsWholeRead = true } else { (inState, stateSeen) = (true, true) }
                }
            case UInt8(ascii: "}"), UInt8(ascii: "]"):
                depth -= 1
            case UInt8(ascii: ",") where depth == 1:
                expectingKey = true
                key.removeAll(keepingCapacity: true)
            default:
                break
            }
        }
    }

    /// Within a string: takes `byte` (an escape's next byte is never its end); true when it
    /// is the string's closing quote.
    private mutating func endsString(_ byte: UInt8) -> Bool {
        if escaped {
            escaped = false
        } else if byte == UInt8(ascii: "\\") {
            escaped = true
        } else if byte == UInt8(ascii: "\"") {
            inString = false
            return true
        }
        return false
    }

    private mutating func takeInState(_ byte: UInt8, keeping: Bool, _ ended: ([UInt8]) throws -> Void) throws {
        if inString {
            if keeping { element.append(byte) }
            elementHasContent = true
            _ = endsString(byte)
            return
        }
        switch byte {
        case UInt8(ascii: "\""):
            inString = true
        case UInt8(ascii: "{"), UInt8(ascii: "["):
            depth += 1
        case UInt8(ascii: "}"), UInt8(ascii: "]"):
            if depth == 2 {
                // The state's own closing bracket: its last element has ended.
                try finishElement(keeping: keeping, closing: true, ended)
                (inState, depth) = (false, 1)
                head.append(byte)
                return
            }
            depth -= 1
        case UInt8(ascii: ",") where depth == 2:
            return try finishElement(keeping: keeping, closing: false, ended)
        default:
            break
        }
        if ![UInt8(ascii: " "), UInt8(ascii: "\n"), UInt8(ascii: "\r"), UInt8(ascii: "\t")].contains(byte) { elementHasContent = true }
        if keeping { element.append(byte) }
    }

    /// An element ended at a comma, or at the state's closing bracket (`closing`). Only spacing
    /// before the closing bracket is no element (`[ ]`, and a trailing comma, `[1,]`, which
    /// Foundation's whole read accepts too); anywhere else (`[1,,2]`, `[,1]`) it is refused, as a
    /// whole read refuses it.
    private mutating func finishElement(keeping: Bool, closing: Bool, _ ended: ([UInt8]) throws -> Void) throws {
        defer {
            element.removeAll(keepingCapacity: true)
            elementHasContent = false
        }
        guard elementHasContent else {
            if closing { return }
            throw JournalError("the checkpoint's state has an empty element (a damaged file): it is not read")
        }
        elementsEnded += 1
        if keeping { try ended(element) }
    }
}
