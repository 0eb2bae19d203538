import Foundation
import Logging
import VBTBus
import VBTDetection
import VBTQuery
import VBTWire

// Checkpoints (`--journal`): every station's state with the input positions and output seqs,
// written off the loop; a command's answer waits for the checkpoint that holds it.

extension DetectorRuntime {
    /// Hands every station's state, the input positions and the output seqs
    /// to the checkpoint writer (never fatal: a failed write is logged and
    /// the next one comes when it is due). With commands waiting for their
    /// answers, at once and at normal priority (`CheckpointWriter.submitNow`).
    func saveCheckpoint(now: Double) {
        guard let checkpointWriter, replay != nil, isActive else { return }
        let answering = heldAcks.contains { $0.generation == nil }
        // The next regular checkpoint waits for the last to be written (its writer waits for
        // a core on a busy machine, seconds): a snapshot keeps what the loop has copied or
        // dropped since, 8 KB a station held 3 s of every 6 (`vbt-bench`'s detector memory),
        // and a second one waiting would keep as much again. Handed over at the first step after.
        guard answering || !checkpointWriter.isWritingRegular else { return }
        let checkpoint = ConsumerCheckpoint(
            publisher: publisher, input: input, inputs: processed.mapValues { UInt64($0) },
            state: stations.keys.sorted().compactMap { stations[$0]?.detector })
        if answering {
            let generation = checkpointWriter.submitNow(checkpoint)
            for index in heldAcks.indices where heldAcks[index].generation == nil { heldAcks[index].generation = generation }
        } else {
            checkpointWriter.submit(checkpoint)
        }
        changed = false
        checkpoints += 1
        // At most a twentieth of a core goes to checkpoints: with many stations the state is
        // big, and the next checkpoint waits longer (after a crash, more is fetched again from
        // the bridges' journals; nothing is lost). Processor time, not wall time: on a busy
        // machine the background writer waits for a core, which costs nobody, and waiting
        // twenty times that left a crashed detector a minute of readings to fetch again.
        checkpointDue = now + max(options.checkpointIntervalS, Self.checkpointShare * checkpointWriter.lastCPUSeconds)
    }

    /// Waits until the checkpoints handed over are written: before this process
    /// ends or hands its stations over, so none is written after.
    func finishCheckpoints() {
        guard let checkpointWriter else { return }
        checkpointWriter.wait()
        if let failure = checkpointWriter.takeFailure() {
            logger.error("checkpoint not written", metadata: ["path": "\(checkpointWriter.file.path)", "error": "\(failure)"])
        }
        try? answerCommands()
    }

    /// Sends the answers whose commands a checkpoint on disk holds: a command is kept by
    /// no journal, so "done" is said only once a crash could no longer lose it. A failed
    /// write is written again at the next step (`step` marks the state changed).
    func answerCommands() throws {
        guard !heldAcks.isEmpty else { return }
        var waiting: [(ack: AckMessage, station: String, athlete: String?, generation: UInt64?)] = []
        for held in heldAcks {
            if let generation = held.generation, checkpointWriter?.isWritten(generation) != false {
                try send(held.ack, station: held.station, athlete: held.athlete)
            } else {
                waiting.append(held)
            }
        }
        heldAcks = waiting
    }
}
