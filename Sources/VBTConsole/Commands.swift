import Foundation
import Synchronization
import VBTWire

/// A command a coach gave on a page, on its way to the bus.
public struct ConsoleCommandRequest: Sendable, Equatable {
    public var id: String
    public var station: String
    public var command: String
    /// The program meant (proto/cmd.schema.json `target`): `*` for every one that acts on it.
    public var target: String
    public var args: JSONObject
    public var athlete: String?
    /// The account that gave it, for the log.
    public var user: String

    public init(id: String, station: String, command: String, target: String, args: JSONObject, athlete: String?, user: String) {
        (self.id, self.station, self.command, self.target, self.args, self.athlete, self.user) = (id, station, command, target, args, athlete, user)
    }

    /// Reads a command from the page's JSON body ({"station","command","args"}), checking it as the
    /// programs will: a known command, a station name, arguments its decoder accepts.
    public static func parse(body: [UInt8], user: String) throws(PayloadError) -> ConsoleCommandRequest {
        let object: JSONObject
        do {
            guard case .object(let parsed) = try JSONParser.parse(body) else { throw PayloadError("the body must be a JSON object") }
            object = parsed
        } catch let error as PayloadError {
            throw error
        } catch {
            throw PayloadError("the body is not JSON: \(error)")
        }
        let station = try object.string("station")
        guard isStationName(station) else { throw PayloadError("station must be a station's name (a-z, A-Z, 0-9, '.', '_', '-'), e.g. rack-01") }
        let command = try object.string("command")
        guard CommandName.all.contains(command) else {
            throw PayloadError("command must be one of \(CommandName.all.sorted().joined(separator: ", ")), not \(command)")
        }
        let args = try object.optionalObject("args") ?? JSONObject()
        switch command {
        case CommandName.athleteAssign: _ = try AthleteAssign(args: args)
        case CommandName.setLoad: _ = try SetLoad(args: args)
        case CommandName.postureCalibrate: _ = try PostureCalibrate(args: args)
        case CommandName.restExtend: _ = try RestExtend(args: args)
        case CommandName.planAssign: _ = try Plan(assignArgs: args)
        default: break
        }
        let id = "console-" + String(UInt64.random(in: .min ... .max), radix: 16)
        return ConsoleCommandRequest(id: id, station: station, command: command, target: "*", args: args, athlete: nil, user: user)
    }
}

/// Commands waiting for the bus thread, which alone owns the publishing socket.
public final class CommandOutbox: Sendable {
    private let queue = Mutex<[ConsoleCommandRequest]>([])
    /// More waiting than this and the page is told to try again (a stalled bus must not grow memory).
    public let capacity = 256

    public init() {}

    /// Queues a command; false when the queue is full.
    public func submit(_ command: ConsoleCommandRequest) -> Bool {
        queue.withLock { queue in
            guard queue.count < capacity else { return false }
            queue.append(command)
            return true
        }
    }

    /// Everything waiting, oldest first, leaving the queue empty.
    public func take() -> [ConsoleCommandRequest] {
        queue.withLock { queue in
            defer { queue.removeAll() }
            return queue
        }
    }
}

/// Whether `name` can be a station in a topic (`<type>.<station>`, proto/README.md): 1 to 64
/// letters, digits, '.', '_' or '-'.
public func isStationName(_ name: String) -> Bool {
    (1...64).contains(name.utf8.count)
        && name.utf8.allSatisfy { ($0 >= 0x30 && $0 <= 0x39) || ($0 | 0x20 >= 0x61 && $0 | 0x20 <= 0x7A) || $0 == 0x2E || $0 == 0x5F || $0 == 0x2D }
}
