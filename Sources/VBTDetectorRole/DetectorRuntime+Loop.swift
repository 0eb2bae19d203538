import Foundation
import Logging
import VBTBus
import VBTDetection
import VBTQuery
import VBTWire

// The detector's loop: a step takes the heartbeat, the recorder's answers, a batch of input,
// the hand-over's progress and the housekeeping, in that order.

extension DetectorRuntime {
    /// Runs until `stop` is set or, after handing over, until done.
    public func run(stop: StopFlag) throws {
        logger.info("rep detector running", metadata: ["instance": "\(instance)", "stations": "\(options.stations)", "takeover": "\(options.takeover)"])
        defer {
            savePatterns()
            finishPatterns()
            finishCheckpoints()
        }
        // Answers held for a checkpoint are sent the step after it is written: no long waits then.
        while !stop.isSet, !isFinished { try step(timeoutMs: heldAcks.isEmpty ? 100 : 5) }
    }

    /// Whether this detector has handed over and is done.
    public var isFinished: Bool { handover.phase == .finished }

    /// Whether some input stream waits for messages being fetched from a journal.
    public var isCatchingUp: Bool { input.isRecovering }

    /// What recovery fetched, and what it could not.
    public var recovery: InOrderInput.Counters { input.counters }

    /// Whether this detector is detecting (not waiting for a hand-over, not handed over).
    public var isActive: Bool { handover.phase == .active }

    /// Messages taken in one step at most: some 64 × 12 µs at 1,000 stations, so
    /// the heartbeat and recovery are never held up by more than a millisecond or so.
    static let batch = 64

    /// One pass of the loop: the input messages queued (waiting up to `timeoutMs`
    /// on sockets for the first; at most `batch`), the recorder's replies, the
    /// hand-over, the heartbeat, and once a second the silent stations.
    public func step(timeoutMs: Int32 = 100) throws {
        guard !isFinished else { return }
        if isActive, options.journal != nil, replay == nil, !journalTried {
            journalTried = true
            try startJournal(lockWaitS: 0)
        }
        // What is queued is taken, up to a batch, before the rest of the step (recovery,
        // replies, heartbeat, checkpoints), whose look is per step, not per message.
        try subscriber.forEachQueued(waitingMs: timeoutMs, upTo: Self.batch) { try handle($0) }
        if handover.isProcessing {
            for message in input.poll() { try processAndHandOver(message, inOrder: true) }
        }
        try collectReplies()
        try progressHandover()
        try heartbeat.tick(self)
        try replay?.serve()
        let now = clock.monotonicSeconds()
        if let checkpointWriter, let failure = checkpointWriter.takeFailure() {
            logger.error("checkpoint not written; retrying", metadata: ["path": "\(checkpointWriter.file.path)", "error": "\(failure)"])
            changed = true
            // Answers waiting for a write that failed wait for the next, made at once.
            for index in heldAcks.indices where heldAcks[index].generation.map(checkpointWriter.isWritten) == false {
                heldAcks[index].generation = nil
                checkpointDue = 0
            }
        }
        if changed, now >= checkpointDue { saveCheckpoint(now: now) }
        try answerCommands()
        let due = nextHousekeeping ?? now + 1  // the first a second after the first step
        nextHousekeeping = due
        if now >= due {
            nextHousekeeping = now + 1
            try closeSilentStations()
            savePatterns()
        }
    }

    var isHandingOver: Bool {
        if case .handingOver = handover.phase { return true }
        return false
    }
}
