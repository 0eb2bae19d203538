import Foundation
import Logging
import VBTBus
import VBTQuery
import VBTWire

// The evaluator's input, message by message: commands (calibrate, assign, unassign) and the
// posture wearable's readings, each station's tracker fed in its stream's order.

extension PostureRuntime {
    func tracker(_ station: String) -> PostureTracker {
        trackers[station] ?? PostureTracker(station: station, settings: settings)
    }

    /// One input message, in its stream's order.
    func handle(_ message: BusMessage) throws {
        let station = message.envelope.station
        changed = true
        if message.envelope.type == CommandMessage.type {
            checkpointDue = 0  // a command is kept by no journal: checkpointed at once
            guard let command = try? message.payload(as: CommandMessage.self),
                command.target == "*" || command.target == "posture-evaluator"
            else { return }
            var state = tracker(station)
            switch command.name {
            case .postureCalibrate:
                let calibrate: PostureCalibrate
                do { calibrate = try PostureCalibrate(args: command.args) } catch {
                    logger.warning(
                        "command not carried out", metadata: ["station": "\(station)", "command": "\(command.command)", "reason": "\(error)"])
                    try send(AckMessage(answering: command, program: "posture-evaluator", refusal: "posture.calibrate: \(error)"), station: station)
                    return
                }
                follow(station)
                let athlete = calibrate.athlete ?? state.athlete ?? station
                let seconds = calibrate.seconds ?? 10
                state.startCalibration(athlete: athlete, seconds: min(600, max(0.5, seconds)))
                logger.info(
                    "posture calibration started",
                    metadata: ["station": "\(station)", "athlete": "\(athlete)", "seconds": "\(seconds)", "correlation_id": "\(command.id)"])
                // Done means started: the calibration message follows when the seconds are over.
                let detail = "calibrating \(athlete) for \(String(format: "%g", min(600, max(0.5, seconds)))) s"
                try send(AckMessage(answering: command, program: "posture-evaluator", refusal: nil, detail: detail), station: station, athlete: athlete)
            case .athleteAssign:
                guard let athlete = (try? AthleteAssign(args: command.args))?.athlete else { break }
                if let stored = store.byAthlete[athlete] {
                    state.apply(stored)
                    logger.info("posture calibration loaded", metadata: ["station": "\(station)", "athlete": "\(athlete)"])
                } else {
                    // Never judge one athlete with another's model; the recorder may know theirs.
                    state.clearCalibration(athlete: athlete)
                    requestCalibration(athlete: athlete, station: station)
                    logger.info(
                        "no posture calibration here for this athlete; asking the session-recorder (or calibrate with vbt posture calibrate)",
                        metadata: ["station": "\(station)", "athlete": "\(athlete)"])
                }
            case .athleteUnassign:
                state.unassign()
                logger.info("station unassigned", metadata: ["station": "\(station)", "correlation_id": "\(command.id)"])
            default:
                break
            }
            trackers[station] = state
            return
        }
        // Most samples are other sensors': their readings are never built, nor checked (`Subscriber.sampleSensors`).
        guard message.envelope.type == SampleMessage.type, message.sensor == SampleMessage.postureSensor else { return }
        let readings: [SampleMessage.PostureReading]
        do {
            guard case .posture(let posture) = try message.payload(as: SampleMessage.self).readings else { return }
            readings = posture
        } catch {
            // Counted and logged as the subscriber counts what it refuses on receipt (not a line per message).
            subscriber.countMalformed(error, topic: message.topic)
            return
        }
        var state = tracker(station)
        var outputs: [PostureTracker.Output] = []
        for reading in readings { outputs += state.feed(t: reading.t, acc: reading.acc, mag: reading.mag) }
        trackers[station] = state
        if state.calibration == nil, !warnedUncalibrated.contains(station), !outputs.contains(where: { if case .calibrated = $0 { true } else { false } }) {
            warnedUncalibrated.insert(station)
            logger.info("posture readings without a calibration; send posture.calibrate or assign a calibrated athlete", metadata: ["station": "\(station)"])
        }
        for output in outputs {
            switch output {
            case .calibrated(let calibration):
                store.byAthlete[calibration.athlete] = calibration
                if let storePath {
                    do { try store.save(path: storePath) } catch {
                        logger.error("calibration not saved", metadata: ["path": "\(storePath)", "error": "\(error)"])
                    }
                }
                for (sensor, fit) in [("acc", calibration.acc), ("mag", calibration.mag)] where !fit.fromData {
                    logger.warning("default calibration used", metadata: ["station": "\(station)", "sensor": "\(sensor)", "reason": "\(fit.reason ?? "")"])
                }
                try send(CalibrationMessage(calibration), station: station, athlete: calibration.athlete)
            case .posture(let report):
                try send(report.posture, station: station, athlete: report.athlete)
            }
        }
    }
}
