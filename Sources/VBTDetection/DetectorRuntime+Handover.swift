import Foundation
import Logging
import VBTBus
import VBTQuery
import VBTWire

// A live hand-over between two rep-detectors (`--takeover`; the protocol is told at
// `DetectorRuntime`): the old side's finish and the new side's takeover.

extension DetectorRuntime {
    // MARK: Hand-over

    /// The old side: once every stream has passed the new detector's first point, hand over.
    func finishHandoverIfReady() throws {
        guard case .handingOver(let to, let targets, let deadline) = mode else { return }
        let ready = targets.allSatisfy { src, first in position(of: src) >= first - 1 }
        guard ready || clock.monotonicSeconds() >= deadline else { return }
        if !ready { logger.warning("handing over before reaching every stream's point", metadata: ["to": "\(to)"]) }
        // The successor asks the recorder for no handed-over station: what this one caught up
        // on and has not applied yet (no reading since) is applied now, and goes with the state.
        if missedWaiting > 0 {
            for station in stations.keys.sorted() where stations[station]?.missed != nil { try applyMissed(at: station) }
        }
        // Encode everything first: a state that cannot go on the wire aborts the
        // hand-over and this detector keeps running (the new one says so after its timeout).
        var messages: [(HandoffMessage, String)] = []
        do {
            for (station, slot) in stations.sorted(by: { $0.key < $1.key }) {
                let state = String(decoding: try encoder.encode(slot.detector), as: UTF8.self)
                messages.append((HandoffMessage(from: instance, to: to, state: state, done: false, positions: [:]), station))
            }
            messages.append((HandoffMessage(from: instance, to: to, state: nil, done: true, positions: processed), "detector"))
            var stamper = EnvelopeStamper(program: "check")
            for (message, station) in messages { _ = try stamper.encode(message, station: station, ts: 1) }
        } catch {
            logger.error("hand-over aborted: the state cannot be sent; still running", metadata: ["to": "\(to)", "error": "\(error)"])
            mode = .active
            return
        }
        for (message, station) in messages { try publisher.publish(message, station: station) }
        logger.info("handed over", metadata: ["to": "\(to)", "stations": "\(stations.count)"])
        finishCheckpoints()
        mode = .finished
    }

    /// The new side: ask once some input is buffered; give up waiting after the timeout.
    func progressTakeover() throws {
        guard case .takingOver(let buffer, let requested, let deadline, let states) = mode else { return }
        if !requested {
            guard subscriber.stats.busHeartbeats > 0, !buffer.isEmpty || clock.monotonicSeconds() > 3 + (lastStart ?? clock.monotonicSeconds()) else {
                if lastStart == nil { lastStart = clock.monotonicSeconds() }
                return
            }
            guard try publisher.waitForSubscriber(topic: TakeoverMessage.topic(station: "detector"), timeoutS: 0.05) else { return }
            var first: [String: Int] = [:]
            for message in buffer where first[message.envelope.src] == nil { first[message.envelope.src] = Int(message.envelope.seq) }
            try publisher.publish(options.stations.takeoverRequest(instance: instance, firstSeq: first), station: "detector")
            logger.info("takeover requested", metadata: ["streams": "\(first.count)"])
            mode = .takingOver(buffer: buffer, requested: true, deadline: clock.monotonicSeconds() + options.takeoverTimeoutS, states: states)
            return
        }
        if clock.monotonicSeconds() >= deadline {
            logger.warning("no running detector answered the takeover; starting fresh")
            try completeTakeover(states: [:], positions: [:], from: nil)
        }
    }

    func completeTakeover(states: [String: StationDetector], positions handed: [String: Int], from: String?) throws {
        guard case .takingOver(let buffer, _, _, _) = mode else { return }
        // The new process's settings apply from now on (a new --idle-timeout, say).
        stations = states.mapValues { detector in
            var restored = detector
            restored.settings = options.settings
            // Its assignment came with it, up to the predecessor's last command: not asked again.
            return Station(detector: restored, arrived: nil, asked: true)
        }
        positions = handed
        input = InOrderInput(
            transport: transport, logger: logger, settings: options.recovery, wants: wants, positions: handed.mapValues { UInt64($0) },
            producers: input.producers, endpoints: input.endpoints)
        mode = .active
        journalTried = true
        try startJournal(lockWaitS: 5)
        // The old detector saved every pattern it learned before handing over.
        if let path = options.patternsPath, let saved = try? PatternLibrary.load(path: path) { library = saved }
        libraryChanged()
        var replayed = 0
        for message in buffer {
            if message.envelope.type == SampleMessage.type {
                for ready in input.accept(message) where try process(ready, inOrder: true) { replayed += 1 }
            } else if try process(message) {
                replayed += 1
            }
        }
        logger.info(
            "took over", metadata: ["from": "\(from ?? "nobody")", "stations": "\(states.count)", "buffered": "\(buffer.count)", "processed": "\(replayed)"])
    }
}
