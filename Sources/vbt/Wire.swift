import ArgumentParser
import Foundation
import VBTBus
import VBTWire

/// `vbt wire`: every message type this build speaks, checked the way a
/// program receiving it would, and written back the way a program sending it
/// would. For a third-party client's author (is my message right?) and for
/// the wire's own tests (tests/python/test_wire_roundtrip.py holds every
/// proto/ schema's examples to it).
struct Wire: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Check bus messages against this build's decoders and write them back as it encodes them.",
        discussion: """
            Reads JSON frames of bus messages, one a line (a recording's `body`, or a message as a \
            client would publish it), from FILE or standard input. Each is checked like a received \
            message (the envelope rules of proto/README.md, then the type's own fields) and written \
            back as this build would publish it: one JSON line per input line, {"ok":true,"message":{...}} \
            or {"ok":false,"line":N,"error":"..."}. The written message keeps the envelope's type, \
            station, athlete and ts; src and seq are the checker's own. Exits 1 if any line failed.

            A cmd message's args are checked against its command's declaration too (proto/cmd.schema.json): \
            an argument the command does not take, of the wrong type or out of bounds is refused.

            --types lists the message types this build speaks, one a line. --commands prints the \
            commands this build's programs act on, with their arguments, as one JSON array.
            """)

    @Argument(help: "JSON Lines of message frames (default: standard input).")
    var file: String?

    @Flag(help: "List the message types this build speaks and exit.")
    var types = false

    @Flag(help: "Print the commands this build's programs act on, with their arguments and who acts on them (JSON), and exit.")
    var commands = false

    func run() throws {
        if types {
            for name in WireTypes.all.keys.sorted() { print(name) }
            return
        }
        if commands {
            var writer = JSONWriter()
            writer.value(.array(Command.specs.map(\.json)))
            print(String(decoding: writer.bytes, as: UTF8.self))
            return
        }
        let text: String
        if let file {
            guard let data = FileManager.default.contents(atPath: file) else {
                throw ValidationError("cannot read \(file): check the path")
            }
            text = String(decoding: data, as: UTF8.self)
        } else {
            text = String(decoding: FileHandle.standardInput.readDataToEndOfFile(), as: UTF8.self)
        }
        var stamper = EnvelopeStamper(program: "vbt-wire")
        var failed = false
        for (index, line) in text.split(separator: "\n", omittingEmptySubsequences: false).enumerated() {
            let frame = line.trimmingCharacters(in: .whitespaces)
            guard !frame.isEmpty else { continue }
            var writer = JSONWriter()
            writer.beginObject()
            do {
                let body = try WireTypes.roundTrip(Array(frame.utf8), stamper: &stamper)
                writer.key("ok"); writer.bool(true)
                writer.key("message"); writer.raw(body)
            } catch {
                failed = true
                writer.key("ok"); writer.bool(false)
                writer.field("line", index + 1)
                writer.field("error", "\(error)")
            }
            writer.endObject()
            print(String(decoding: writer.bytes, as: UTF8.self))
        }
        if failed { throw ExitCode(1) }
    }
}

/// The message types this build speaks, by their `type`: each decodes a
/// received message and encodes it again.
enum WireTypes {
    typealias RoundTrip = @Sendable (BusMessage, inout EnvelopeStamper) throws -> [UInt8]

    static let all: [String: RoundTrip] = {
        var table: [String: RoundTrip] = [:]
        func add<P: BusPayload>(_ type: P.Type) {
            table[P.type] = { message, stamper in
                let payload = try message.payload(as: P.self)
                return try stamper.encode(
                    payload, station: message.envelope.station, athlete: message.envelope.athlete,
                    ts: message.envelope.ts
                ).body
            }
        }
        for type in MessageTypes.all { add(type) }
        return table
    }()

    /// Checks one JSON frame as a receiver would and encodes it again.
    static func roundTrip(_ frame: [UInt8], stamper: inout EnvelopeStamper) throws -> [UInt8] {
        // The topic a publisher would have sent it under.
        guard case .object(let fields) = try JSONParser.parse(frame),
            case .string(let type)? = fields["type"], case .string(let station)? = fields["station"]
        else {
            throw ValidationError("a message is a JSON object with string fields type and station")
        }
        let message = try decodeMessage(topic: Array("\(type).\(station)".utf8), body: frame)
        guard let roundTrip = all[type] else {
            throw ValidationError("no message type \(type) in this build (vbt wire --types lists them)")
        }
        if type == CommandMessage.type {
            let command = try message.payload(as: CommandMessage.self)
            try Command.checkArguments(command.command, command.args)
        }
        return try roundTrip(message, &stamper)
    }
}

extension CommandSpec {
    /// The declaration as `vbt wire --commands` prints it.
    var json: JSONValue {
        .object(
            JSONObject([
                ("name", .string(name)), ("summary", .string(summary)), ("programs", .array(programs.map { .string($0) })),
                ("arguments", .array(arguments.map(\.json))),
            ]))
    }
}

extension CommandArgument {
    /// The argument as `vbt wire --commands` prints it: its JSON type, and for arrays their items'.
    var json: JSONValue {
        var fields: [(key: String, value: JSONValue)] = [("name", .string(name)), ("required", .bool(required))]
        switch kind {
        case .string: fields.append(("type", .string("string")))
        case .choice(let allowed): fields += [("type", .string("string")), ("enum", .array(allowed.map { .string($0) }))]
        case .number: fields.append(("type", .string("number")))
        case .integer: fields.append(("type", .string("integer")))
        case .numbers: fields += [("type", .string("array")), ("items", .object(JSONObject([("type", .string("number"))])))]
        case .objects(let items):
            fields += [("type", .string("array")), ("items", .array(items.map(\.json)))]
        }
        if let range {
            fields += [("minimum", .number(range.lowerBound)), ("maximum", .number(range.upperBound))]
        }
        fields.append(("summary", .string(summary)))
        return .object(JSONObject(fields))
    }
}
