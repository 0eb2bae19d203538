import VBTQuery
import VBTWire

// What the live rep-detector and `vbt eval` share: how a bus message's
// readings and commands reach a station's detector. One path, so an offline
// evaluation measures exactly what runs in the gym.

extension StationDetector {
    /// How far a reading's time may be from its message's send time (`ts`): one further off is
    /// skipped, live (DetectorRuntime.process) and offline alike.
    package static let maxReadingSkewS = 3_600.0

    /// Feeds every reading of a `sample` message for which `usable` holds
    /// (the runtime skips readings whose time is implausible). Posture
    /// readings are not the detector's.
    public mutating func feed(_ readings: SampleMessage.Readings, usable: (Double) -> Bool = { _ in true }) -> [DetectorOutput] {
        var outputs: [DetectorOutput] = []
        switch readings {
        case .distance(let list):
            for r in list where usable(r.t) {
                outputs += resumed(at: r.t)
                outputs += feedDistance(t: r.t, distanceMm: r.distanceMm, accG: r.accG.map { ($0.x, $0.y, $0.z) })
            }
        case .imu(let list):
            for r in list where usable(r.t) {
                outputs += resumed(at: r.t)
                outputs += feedIMU(
                    t: r.t, accG: (r.accG.x, r.accG.y, r.accG.z), gyroDps: (r.gyroDps.x, r.gyroDps.y, r.gyroDps.z),
                    angleDeg: r.angleDeg.map { ($0.x, $0.y) })
            }
        case .posture:
            break
        }
        return outputs
    }

    /// Before a reading at `t` that resumes the readings after a silence as long as the one that
    /// ends a station's readings (`idleTimeoutS`): what was in progress is judged where it stood
    /// (`finish`), as the live detector does when the station falls silent. By reading time, so
    /// the same readings give the same judgement live, fetched again after a restart (which the
    /// wall clock's silence does not see), and offline. Nothing to judge gives nothing.
    mutating func resumed(at t: Double) -> [DetectorOutput] {
        guard lastReadingT.isFinite, t - lastReadingT >= settings.idleTimeoutS else { return [] }
        return finish(at: lastReadingT)
    }

    /// Carries out a command addressed to the rep-detector (`athlete.assign`,
    /// `athlete.unassign`, `set.load`, `set.end`); other commands change nothing. Returns what it
    /// produced (a set ended by command). A malformed command changes nothing and is thrown
    /// back, naming what is wrong.
    public mutating func apply(_ command: CommandMessage) throws(PayloadError) -> [DetectorOutput] {
        guard let command = try Command(command) else { return [] }
        return apply(command)
    }

    /// Carries out a command read (`Command`); those not the rep-detector's change nothing.
    public mutating func apply(_ command: Command) -> [DetectorOutput] {
        switch command {
        case .athleteAssign(let assign):
            var assignment = Assignment()
            assignment.athlete = assign.athlete
            if let exercise = assign.exercise { assignment.exercise = exercise }
            assignment.loadKg = assign.loadKg
            if let threshold = assign.vlThresholdPct { assignment.velocityLossThresholdPct = threshold }
            if let reference = assign.vlReference.flatMap(VelocityLossReference.init(rawValue:)) { assignment.velocityLossReference = reference }
            assignment.targetZone = assign.targetZone
            assignment.romMm = assign.romMm
            assignment.mvtMps = assign.mvtMps
            // A tempo the detector cannot read judges nothing (the notation: Phases.swift).
            assignment.tempo = assign.tempo.flatMap(Tempo.init)
            self.assignment = assignment
            return []
        case .athleteUnassign:
            // The set in progress was the athlete's: it ends; what follows belongs to nobody.
            let ended = endSet(reason: .command, at: lastReadingT)
            assignment = Assignment()
            return ended
        case .setLoad(let load):
            assignment.loadKg = load.loadKg
            return []
        case .setEnd:
            return endSet(reason: .command, at: lastReadingT)
        default:
            return []
        }
    }
}

/// A command that changed a station's assignment, as the detector applied it: the
/// envelope's `ts` (the sender's clock, which the recorder stores too) and its id.
public struct AppliedCommand: Sendable, Codable, Equatable {
    public var ts: Double
    public var id: String

    /// Creates a value.
    public init(ts: Double, id: String) { (self.ts, self.id) = (ts, id) }
}

extension StationDetector {
    /// `apply`, noting a command that changes the assignment (`Command.Name.changesAssignment`;
    /// `set.end` does not: a stored assignment older than it may still be one missed) as the
    /// last one applied (`ts`: its envelope's). A refused command changes nothing, so it is not noted.
    public mutating func apply(_ command: CommandMessage, ts: Double) throws(PayloadError) -> [DetectorOutput] {
        guard let typed = try Command(command) else { return [] }
        let outputs = apply(typed)
        if typed.name.changesAssignment { lastCommand = AppliedCommand(ts: ts, id: command.id) }
        return outputs
    }

    /// The command that would bring this station to `stored`, the recorder's latest assignment
    /// of it, or nil when there is nothing to catch up on: the stored one is not newer (by
    /// `ts`) than the last command applied, or is that same command, or is not one the detector
    /// acts on (a `plan.assign` is the notifier's, which sends the `athlete.assign` of the plan's
    /// item after it; a row from before the recorder kept commands has no arguments).
    /// A `set.load` row holds the whole assignment with its new load: applied as `athlete.assign`.
    public func missedCommand(_ stored: AssignmentRecord) -> CommandMessage? {
        guard let id = stored.cmdId, let name = stored.command.flatMap(Command.Name.init), name.changesAssignment else { return nil }
        if let last = lastCommand, stored.ts <= last.ts || id == last.id { return nil }
        if name == .athleteUnassign { return CommandMessage(id: id, command: .athleteUnassign, target: "rep-detector") }
        guard let args = stored.args else { return nil }
        return CommandMessage(id: id, command: .athleteAssign, target: "rep-detector", args: args)
    }

    /// Applies `stored` when this detector missed it (`missedCommand`), as the command would
    /// have been applied; nil when it did not. What it made: a set ended by `athlete.unassign`.
    public mutating func catchUp(on stored: AssignmentRecord) throws(PayloadError) -> (command: CommandMessage, outputs: [DetectorOutput])? {
        guard let command = missedCommand(stored) else { return nil }
        let outputs = try apply(command)
        lastCommand = AppliedCommand(ts: stored.ts, id: command.id)
        return (command, outputs)
    }
}
