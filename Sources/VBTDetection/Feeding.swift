import VBTBus
import VBTWire

// What the live rep-detector and `vbt eval` share: how a bus message's
// readings and commands reach a station's detector. One path, so an offline
// evaluation measures exactly what runs in the gym.

extension StationDetector {
    /// Feeds every reading of a `sample` message for which `usable` holds
    /// (the runtime skips readings whose time is implausible). Posture
    /// readings are not the detector's.
    public mutating func feed(_ readings: SampleMessage.Readings, usable: (Double) -> Bool = { _ in true }) -> [DetectorOutput] {
        var outputs: [DetectorOutput] = []
        switch readings {
        case .distance(let list):
            for r in list where usable(r.t) {
                outputs += feedDistance(t: r.t, distanceMm: r.distanceMm, accG: r.accG.map { ($0.x, $0.y, $0.z) })
            }
        case .imu(let list):
            for r in list where usable(r.t) {
                outputs += feedIMU(
                    t: r.t, accG: (r.accG.x, r.accG.y, r.accG.z), gyroDps: (r.gyroDps.x, r.gyroDps.y, r.gyroDps.z),
                    angleDeg: r.angleDeg.map { ($0.x, $0.y) })
            }
        case .posture:
            break
        }
        return outputs
    }

    /// Carries out a command addressed to the rep-detector (`athlete.assign`,
    /// `athlete.unassign`, `set.load`, `set.end`); other commands change nothing. Returns what it
    /// produced (a set ended by command). A malformed `athlete.assign`
    /// changes nothing and is thrown back, naming what is wrong.
    public mutating func apply(_ command: CommandMessage) throws(PayloadError) -> [DetectorOutput] {
        let args = command.args
        switch command.command {
        case CommandName.athleteAssign:
            let assign = try AthleteAssign(args: args)
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
        case CommandName.athleteUnassign:
            // The set in progress was the athlete's: it ends; what follows belongs to nobody.
            let ended = endSet(reason: .command, at: lastReadingT)
            assignment = Assignment()
            return ended
        case CommandName.setLoad:
            if let load = try? SetLoad(args: args) { assignment.loadKg = load.loadKg }
            return []
        case CommandName.setEnd:
            return endSet(reason: .command, at: lastReadingT)
        default:
            return []
        }
    }
}
