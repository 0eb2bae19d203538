import Foundation
import Logging
import VBTBus
import VBTDetection
import VBTQuery
import VBTWire

// A live hand-over between two rep-detectors (`--takeover`; the protocol is told at
// `DetectorRuntime`, its phases are `Handover`'s): what the hand-over asks, carried out.

extension DetectorRuntime {
    // MARK: Hand-over

    /// Tells the hand-over the time, whether the bus has been heard and how far each stream is,
    /// and carries out what it asks (each step, and after each message while handing over).
    func progressHandover() throws {
        let heard = subscriber.stats.busHeartbeats > 0
        guard let action = handover.tick(now: clock.monotonicSeconds(), busHeard: heard, position: position(of:)) else { return }
        try carryOut(action)
    }

    /// Does what the hand-over asks: the sockets, the journal, the stations and the logs are the runtime's.
    func carryOut(_ action: Handover<StationDetector>.Action) throws {
        switch action {
        case .requestTakeover(let first):
            // Asked again at the next step when nobody subscribes to it yet.
            guard try publisher.waitForSubscriber(topic: TakeoverMessage.topic(station: "detector"), timeoutS: 0.05) else { return }
            try publisher.publish(options.stations.takeoverRequest(instance: instance, firstSeq: first), station: "detector")
            handover.requestSent(now: clock.monotonicSeconds())
            logger.info("takeover requested", metadata: ["streams": "\(first.count)"])
        case .handOff(let to, let late):
            if late { logger.warning("handing over before reaching every stream's point", metadata: ["to": "\(to)"]) }
            // The successor asks the recorder for no handed-over station: what this one caught up
            // on and has not applied yet (no reading since) is applied now, and goes with the state.
            if missedWaiting > 0 {
                for station in stations.keys.sorted() where stations[station]?.missed != nil { try applyMissed(at: station) }
            }
            if let next = handover.handOff(states: stations.mapValues(\.detector), positions: processed) { try carryOut(next) }
        case .send(let messages, let to):
            for (message, station) in messages { try publisher.publish(message, station: station) }
            logger.info("handed over", metadata: ["to": "\(to)", "stations": "\(stations.count)"])
            finishCheckpoints()
        case .abort(let to, let error):
            // The new one says so after its timeout.
            logger.error("hand-over aborted: the state cannot be sent; still running", metadata: ["to": "\(to)", "error": "\(error)"])
        case .complete(let states, let positions, let from, let buffer):
            try completeTakeover(states: states, positions: positions, from: from, buffer: buffer)
        case .startFresh(let buffer):
            logger.warning("no running detector answered the takeover; starting fresh")
            try completeTakeover(states: [:], positions: [:], from: nil, buffer: buffer)
        }
    }

    /// The new side, active now: restores the handed-over states (none when starting fresh),
    /// goes on from the old side's positions, opens the journal and processes the buffer.
    func completeTakeover(states: [String: StationDetector], positions handed: [String: Int], from: String?, buffer: [BusMessage]) throws {
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
        journalTried = true
        try startJournal(lockWaitS: 5)
        // The old detector saved every pattern it learned before handing over.
        patterns.replace(with: options.patternsPath.flatMap { try? PatternLibrary.load(path: $0) })
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
