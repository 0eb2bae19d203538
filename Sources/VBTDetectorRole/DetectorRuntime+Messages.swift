import Foundation
import Logging
import VBTBus
import VBTDetection
import VBTQuery
import VBTWire

// The detector's input, message by message: sample messages fed to their station in reading-time
// order, commands applied and answered, what a station made published, silent stations ended.

extension DetectorRuntime {
    // MARK: Messages

    func processAndHandOver(_ message: BusMessage, inOrder: Bool = false) throws {
        try process(message, inOrder: inOrder)
        if isHandingOver { try progressHandover() }
    }

    func handle(_ message: BusMessage) throws {
        switch message.envelope.type {
        case SampleMessage.type, CommandMessage.type:
            // Taking over, the message is buffered; handed over, dropped.
            guard matches(message.envelope.station), handover.take(message) else { return }
            if message.envelope.type == SampleMessage.type {
                try input.accept(message) { try processAndHandOver($0, inOrder: true) }
            } else {
                try processAndHandOver(message)
            }
        case HeartbeatMessage.type:
            input.note(heartbeat: message)
            let name = message.envelope.station
            if name.hasPrefix("bridge-") {
                let station = String(name.dropFirst("bridge-".count))
                let stopping = (try? message.payload(as: HeartbeatMessage.self))?.stopping == true
                bridgeHeard[station] = stopping ? nil : clock.monotonicSeconds()
            }
        case TakeoverMessage.type:
            // Only the detector serving the same stations hands over: a gym split
            // between detectors replaces them one at a time.
            guard let request = try? message.payload(as: TakeoverMessage.self),
                handover.request(request, ours: options.stations.isAsked(by: request), now: clock.monotonicSeconds())
            else { return }
            logger.info("takeover requested", metadata: ["by": "\(request.instance)"])
            try progressHandover()
        case HandoffMessage.type:
            guard let handoff = try? message.payload(as: HandoffMessage.self), let action = handover.handoff(handoff) else { return }
            try carryOut(action)
        default:
            return
        }
    }

    func matches(_ station: String) -> Bool {
        // Every station (the default), decided without handing both strings to C for every message.
        options.stations.servesAll || options.stations.serves(station)
    }

    /// Feeds one input message to its station's detector and publishes what comes out; false
    /// when its stream had passed it already. `inOrder`: the in-order input delivered it, which
    /// delivers each message of a stream once, in order, from the positions it was given, and
    /// keeps the stream's position (`processed`); any other message's is kept in `positions`.
    @discardableResult
    func process(_ message: BusMessage, inOrder: Bool = false) throws -> Bool {
        let station = message.envelope.station
        // A stream position already processed (restored from a hand-over) is skipped (one
        // look-up: the position is read and moved on in place). A sample in order is not looked
        // up again: at 1,000 stations a table of a thousand streams, each look-up a few cache
        // misses (`vbt-bench --only runtime --rack-stations 1000`).
        if !inOrder { guard Self.moveOn(&positions[message.envelope.src, default: 0], to: Int(message.envelope.seq)) else { return false } }
        let now = clock.monotonicSeconds()
        var command: CommandMessage?
        if message.envelope.type == CommandMessage.type {
            guard let decoded = try? message.payload(as: CommandMessage.self), decoded.target == "*" || decoded.target == "rep-detector" else {
                // Another program's command still says the station is there.
                stations[station]?.arrived = now
                return true
            }
            command = decoded
        }
        defer {
            // A station first heard of in this process's life: its assignment is asked for.
            while let asked = stationsToAsk.popLast() { requestAssignment(of: asked) }
        }
        // A missed assignment applies before the first readings sent at or after it.
        if missedWaiting > 0, command == nil, let missed = stations[station]?.missed, message.envelope.ts >= missed.ts {
            try applyMissed(at: station)
        }
        // When this message was taken from the input: a rep it completes carries it (`received_ts`).
        let received = clock.wallSeconds()
        // Fed in place in the dictionary (its buffers have one owner and are changed where
        // they lie): nothing else may hold the station's detector meanwhile (a second
        // reference would make the first append copy its buffers).
        let (outputs, inputT, ack, athleteBefore, athleteAfter) = arrive(at: station, now: now) {
            feedInTimeOrder(message, command: command, into: &$0)
        }
        changed = true
        // A command is kept by no journal: checkpointed at once. What readings made (reps, set
        // boundaries) is made again from the bridges' journals after a crash, and what was
        // already published is not sent twice (Publisher.resume): the regular checkpoint is
        // enough (one at every set boundary would be a whole checkpoint of every station, many
        // a second in a busy gym).
        if message.envelope.type == CommandMessage.type { checkpointDue = 0 }
        for output in outputs {
            if case .pattern(let pattern) = output {
                learn(pattern)
            } else {
                try publish(output, athlete: athleteBefore, inputT: inputT, receivedTs: inputT == nil ? nil : received)
            }
        }
        // The answer after what the command made (a set's end before "done"), and after a
        // checkpoint holding the command is on disk (`answerCommands`); without one, at once.
        if let ack {
            if checkpointWriter != nil, replay != nil, isActive {
                heldAcks.append((ack, station, athleteAfter, nil))
            } else {
                try send(ack, station: station, athlete: athleteAfter)
            }
        }
        return true
    }

    /// Moves a stream's position on to `seq`; false when `seq` was processed already.
    static func moveOn(_ position: inout Int, to seq: Int) -> Bool {
        guard seq > position else { return false }
        position = seq
        return true
    }

    /// A station's bar IMU readings wait, at most this long in reading time, for its laser's
    /// readings of the same time: which of the two is used (`StationDetector.usesIMU`) then
    /// depends on the readings alone, not on which stream's message came first.
    static let imuWaitS = 2.0

    /// What one message makes of a station: fed in reading-time order across its sensors.
    /// The laser's readings go on at once; an IMU message waits until the laser has passed its
    /// last reading, or until the IMU is `imuWaitS` past it (the laser has stopped, or trails
    /// beyond the bound), and is fed then, in arrival order. A station with no laser waits for
    /// nothing. Commands and other sensors go on at once.
    func feedInTimeOrder(
        _ message: BusMessage, command: CommandMessage?, into slot: inout Station
    ) -> (
        outputs: [DetectorOutput], inputT: Double?, ack: AckMessage?, athleteBefore: String?, athleteAfter: String?
    ) {
        let sensor = command == nil ? message.sensor : nil
        if command == nil { slot.fedTs = max(slot.fedTs, message.envelope.ts) }
        if sensor == SampleMessage.imuSensor, slot.laserT > -.infinity {
            guard let lastT = message.readingTimes()?.max() ?? (try? message.payload(as: SampleMessage.self))?.readings.latestTime else {
                return feed(message, command: command, into: &slot.detector)
            }
            slot.imuT = max(slot.imuT, lastT)
            if slot.heldIMU.isEmpty, lastT <= slot.laserT { return feed(message, command: command, into: &slot.detector) }
            slot.heldIMU.append((message, lastT))
            let athlete = slot.detector.assignment.athlete
            var result: (outputs: [DetectorOutput], inputT: Double?, ack: AckMessage?, athleteBefore: String?, athleteAfter: String?) =
                ([], nil, nil, athlete, athlete)
            releaseIMU(of: &slot, into: &result)
            return result
        }
        var result = feed(message, command: command, into: &slot.detector)
        if sensor == SampleMessage.distanceSensor, let t = result.inputT {
            slot.laserT = max(slot.laserT, t)
            releaseIMU(of: &slot, into: &result)
        }
        return result
    }

    /// Feeds the held IMU messages the laser has passed (or, with `all`, every one: the
    /// readings have ended), adding what they make to `result`.
    func releaseIMU(
        of slot: inout Station, all: Bool = false,
        into result: inout (outputs: [DetectorOutput], inputT: Double?, ack: AckMessage?, athleteBefore: String?, athleteAfter: String?)
    ) {
        let passed = max(slot.laserT, slot.imuT - Self.imuWaitS)
        while let first = slot.heldIMU.first, all || first.lastT <= passed {
            slot.heldIMU.removeFirst()
            let made = feed(first.message, command: nil, into: &slot.detector)
            result.outputs += made.outputs
            result.inputT = [result.inputT, made.inputT].compactMap { $0 }.max()
            result.athleteAfter = made.athleteAfter
        }
    }

    /// What one message (a sample, or a command for this detector) makes of a station's
    /// detector: the outputs, the newest reading time fed, the command's answer, and the
    /// athlete at the station before and after (a set ended by athlete.unassign is still the
    /// athlete's before).
    func feed(
        _ message: BusMessage, command: CommandMessage?, into detector: inout StationDetector
    ) -> (
        outputs: [DetectorOutput], inputT: Double?, ack: AckMessage?, athleteBefore: String?, athleteAfter: String?
    ) {
        if detector.patternsVersion != patterns.version {
            detector.patterns = patterns.shared
            detector.patternsVersion = patterns.version
        }
        let athleteBefore = detector.assignment.athlete
        var outputs: [DetectorOutput] = []
        var inputT: Double?
        var ack: AckMessage?
        let sensor = message.sensor
        if let command {
            (outputs, ack) = apply(command, ts: message.envelope.ts, to: &detector)
        } else if sensor == SampleMessage.postureSensor {
            // Not the detector's (StationDetector.feed): not decoded into readings.
        } else {
            // A reading time far from when it was sent (a broken clock, a bad
            // replay) would stall the station or worse: such readings are skipped.
            let ts = message.envelope.ts
            let station = message.envelope.station
            func sane(_ t: Double) -> Bool {
                guard abs(t - ts) <= StationDetector.maxReadingSkewS else {
                    badTimes += 1
                    if badTimes == 1 || badTimes % 1000 == 0 {
                        logger.warning(
                            "readings with implausible times skipped",
                            metadata: ["station": "\(station)", "t": "\(t)", "ts": "\(ts)", "count": "\(badTimes)"])
                    }
                    return false
                }
                return true
            }
            if sensor == SampleMessage.imuSensor, let times = message.readingTimes(),
                !times.contains(where: detector.usesIMU(at:))
            {
                // The laser speaks at this station: of the IMU's readings only their times count.
                outputs = detector.feedUnusedIMU(times: times.filter(sane))
                inputT = times.max()
            } else {
                do {
                    let sample = try message.payload(as: SampleMessage.self)
                    outputs = detector.feed(sample.readings, usable: sane)
                    inputT = sample.readings.latestTime
                } catch {
                    // Counted and logged as the subscriber counts what it refuses on receipt (not a line per message).
                    subscriber.countMalformed(error, topic: message.topic)
                }
            }
        }
        return (outputs, inputT, ack, athleteBefore, detector.assignment.athlete)
    }

    /// Notes a message's arrival at `station` (its detector made if new) and changes its detector
    /// where it lies, in one look-up.
    func arrive<T>(at station: String, now: Double, _ change: (inout Station) -> T) -> T {
        func arrived(_ slot: inout Station) -> T {
            slot.arrived = now
            slot.ended = false
            if !slot.asked {
                slot.asked = true
                stationsToAsk.append(station)
            }
            return change(&slot)
        }
        return arrived(&stations[station, default: Station(detector: StationDetector(station: station, settings: options.settings), arrived: now)])
    }
}
