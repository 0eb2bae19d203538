import Foundation
import Logging
import VBTBus
import VBTDetection
import VBTQuery
import VBTWire

// What the detector sends: a command applied and its answer, a station's outputs as bus
// messages, and the end of a station's readings when it falls silent.

extension DetectorRuntime {
    /// Applies a command; the outputs it made and the answer to it (nil for a command the
    /// detector does not act on).
    func apply(_ command: CommandMessage, ts: Double, to detector: inout StationDetector) -> (outputs: [DetectorOutput], ack: AckMessage?) {
        guard Command.isActedOn(command.command, by: "rep-detector") else { return ([], nil) }
        func answer(refusal: String?, detail: String? = nil) -> AckMessage {
            if let refusal {
                logger.warning(
                    "command not carried out",
                    metadata: [
                        "station": "\(detector.station)", "command": "\(command.command)",
                        "correlation_id": "\(command.id)", "reason": "\(refusal)",
                    ])
            }
            return AckMessage(answering: command, program: "rep-detector", refusal: refusal, detail: detail)
        }
        let outputs: [DetectorOutput]
        do { outputs = try detector.apply(command, ts: ts) } catch { return ([], answer(refusal: "\(command.command): \(error)")) }
        switch command.name {
        case .athleteAssign:
            let assignment = detector.assignment
            logger.info(
                "station assigned",
                metadata: [
                    "station": "\(detector.station)", "athlete": "\(assignment.athlete ?? "")", "exercise": "\(assignment.exercise)",
                    "correlation_id": "\(command.id)",
                ])
            let load = assignment.loadKg.map { String(format: " at %g kg", $0) } ?? ""
            return (outputs, answer(refusal: nil, detail: "\(assignment.exercise)\(load)\(assignment.athlete.map { " for \($0)" } ?? "")"))
        case .athleteUnassign:
            logger.info("station unassigned", metadata: ["station": "\(detector.station)", "correlation_id": "\(command.id)"])
            let ended = outputs.contains { if case .set = $0 { true } else { false } }
            return (outputs, answer(refusal: nil, detail: ended ? "the set in progress ended" : "nobody at \(detector.station)"))
        case .setEnd:
            let ended = outputs.contains { if case .set = $0 { true } else { false } }
            return (outputs, answer(refusal: ended ? nil : "no set in progress at \(detector.station)"))
        default:
            return (outputs, answer(refusal: nil))
        }
    }

    /// Publishes what a station's detector made; `inputT` is the last reading time of the sample message it came
    /// from, and `receivedTs` when that message was taken from the input.
    func publish(_ output: DetectorOutput, athlete: String?, inputT: Double? = nil, receivedTs: Double? = nil) throws {
        switch output {
        case .rep(let rep):
            let m = rep.measurement
            // The measured figures go as they are: a figure the measurement gains is published with it.
            var message = RepMessage(
                setId: rep.setId, repId: rep.repId, index: rep.index, figures: m.figures, velocityLossPct: rep.velocityLossPct,
                tEnd: rep.tEnd, detector: instance, concentricStartT: m.concentricStartT, concentricEndT: m.concentricEndT,
                exercise: rep.exercise, loadKg: rep.loadKg, zone: rep.zone, sensor: rep.sensor)
            message.tInput = inputT.map { max($0, rep.tEnd) }
            message.receivedTs = receivedTs
            if let phases = rep.phases {
                (message.eccentricS, message.eccentricMeanMps) = (phases.eccentricS, phases.eccentricMeanMps)
                (message.pauseBottomS, message.pauseTopS) = (phases.pauseBottomS, phases.pauseTopS)
            }
            (message.tempo, message.tempoMet) = (rep.tempo?.text, rep.tempoVerdict?.met)
            message.tempoMissed = rep.tempoVerdict.map { $0.missed.map(\.rawValue) }
            // Late when its readings came late (a journal fetch after an outage, a restart's catch-up,
            // a rise judged only when the station fell silent): marked so, never passed off as live.
            message.markLateness(publishedAt: clock.wallSeconds())
            try send(message, station: rep.station, athlete: athlete)
        case .rejected(let rejected):
            let m = rejected.measurement
            try send(
                RejectedMessage(
                    reason: rejected.reason, detail: rejected.detail, romMm: m.romMm, concentricS: m.concentricS,
                    meanVelocityMps: m.meanVelocityMps, tEnd: rejected.tEnd, detector: instance, sensor: rejected.sensor),
                station: rejected.station, athlete: athlete)
        case .set(let event):
            try send(
                SetMessage(
                    setId: event.setId, event: event.kind == .start ? .start : .end, reps: event.kind == .end ? event.reps : nil,
                    reason: event.reason.flatMap { SetMessage.Reason(rawValue: $0.rawValue) },
                    bestMeanVelocityMps: event.bestMeanVelocityMps, velocityLossPct: event.velocityLossPct,
                    exercise: event.exercise, loadKg: event.loadKg),
                station: event.station, athlete: event.athlete)
        case .pattern:
            return  // stored by the runtime, not published
        case .profile(let profile):
            try send(
                ProfileMessage(
                    exercise: profile.exercise, loadsKg: profile.points.map(\.loadKg), meanVelocitiesMps: profile.points.map(\.meanVelocityMps),
                    interceptMps: profile.interceptMps, slopeMpsPerKg: profile.slopeMpsPerKg, r2: profile.r2, mvtMps: profile.mvtMps,
                    e1rmKg: profile.e1rmKg), station: profile.station, athlete: profile.athlete)
        }
    }

    /// Ends the readings of stations silent for `idleTimeoutS` of wall time (their rises
    /// judged, their sets ended), and forgets input streams that ended long ago.
    func closeSilentStations() throws {
        guard isActive else { return }
        let now = clock.monotonicSeconds()
        if now >= nextStreamLook {
            nextStreamLook = now + 60
            for src in stillStreams.stale(processed, now: now, afterS: Self.forgetStreamAfterS) {
                positions[src] = nil
                input.forget(src)
            }
        }
        let silent = stations.compactMap { station, slot -> (String, Double)? in
            guard let arrived = slot.arrived, now - arrived >= options.settings.idleTimeoutS + Self.silenceMarginS, !slot.ended else { return nil }
            // Its bridge unheard too: cut off, not done; waited for a while longer.
            if let heard = bridgeHeard[station], now - heard > Self.bridgeGapS, now - arrived < Self.unheardBridgeWaitS { return nil }
            return (station, arrived)
        }
        for (station, arrived) in silent {
            // A station whose readings are being fetched is not silent.
            guard !input.isRecovering(topic: SampleMessage.topic(station: station)), var slot = stations[station] else { continue }
            // Its readings have ended, as a recording's do at its end (`vbt eval`): the IMU
            // readings held for the laser are fed, and a rise in progress, held or waiting
            // for its lowering is judged where it stands, so every movement is accounted for.
            var released: (outputs: [DetectorOutput], inputT: Double?, ack: AckMessage?, athleteBefore: String?, athleteAfter: String?) =
                ([], nil, nil, nil, nil)
            releaseIMU(of: &slot, all: true, into: &released)
            var outputs = released.outputs
            outputs += slot.detector.finish(at: slot.detector.lastReadingT)
            outputs += slot.detector.closeIdleSet(at: slot.detector.lastReadingT + (now - arrived))
            slot.ended = true
            let detector = slot.detector
            stations[station] = slot
            // Ended by the wall clock, which no journal replays: checkpointed at once.
            if !outputs.isEmpty { checkpointDue = 0 }
            for output in outputs {
                if case .pattern(let pattern) = output { learn(pattern) } else { try publish(output, athlete: detector.assignment.athlete) }
            }
        }
    }
}
