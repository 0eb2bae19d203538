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
        guard Command.names.contains(command) else {
            throw PayloadError("command must be one of \(Command.names.sorted().joined(separator: ", ")), not \(command)")
        }
        let args = try object.optionalObject("args") ?? JSONObject()
        // Read as the programs will read it: refused here, in the same words, rather than by them.
        _ = try Command(name: command, args: args)
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

extension ConsoleBoard {
    /// Why `request` cannot go to its station now, or nil when it can: a station the board has
    /// never heard (a typo would become a row that never goes away), a silent one (for commands
    /// that need its sensors), or an athlete who is at another station (one station each).
    public func refusal(for request: ConsoleCommandRequest) -> String? {
        guard let state = stations[request.station] else {
            return "no station \(request.station) has been heard on the bus: check the name, and that its sensor-bridge runs"
        }
        let assigning: String?
        switch try? Command(name: request.command, args: request.args) {
        case .athleteAssign(let assign): assigning = assign.athlete
        case .planAssign(let plan): assigning = plan.athlete
        case .athleteUnassign: return state.athlete == nil ? "nobody is at \(request.station)" : nil
        default:
            return state.silent ? "\(request.station) is silent: its sensor-bridge has not been heard for \(Int(silentAfterS)) s" : nil
        }
        if let athlete = assigning, let other = stations.values.first(where: { $0.athlete == athlete && $0.station != request.station }) {
            return "\(athlete) is at \(other.station): unassign them there first (one station per athlete)"
        }
        return nil
    }
}
