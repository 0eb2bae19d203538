import Foundation
import Logging
import VBTBus
import VBTDetection
import VBTQuery
import VBTWire

// What the detector asks the session-recorder (learned patterns, a station's assignment it may
// have missed while down) and keeps of its answers, without ever waiting for them. The patterns'
// state is `PatternSync`'s; here are the questions, the posts and the file's writes.

extension DetectorRuntime {
    /// Asks the recorder for the patterns it holds (once, at start, when this
    /// detector has none). The answer is taken by `collectReplies` whenever it
    /// comes: the loop never waits for it.
    func requestPatterns() {
        guard let recorder else { return }
        do {
            patterns.asked(id: try recorder.request(.patternList, ExerciseFilterArgs()), deadline: clock.monotonicSeconds() + options.recorderTimeoutS)
        } catch {
            logger.info("no patterns from the session-recorder", metadata: ["reason": "\(error)"])
        }
    }

    /// Asks the recorder for a station's latest assignment, once in this process's life, at start
    /// for a restored station, else when its first message comes. The answer is taken by
    /// `collectReplies` whenever it comes (the loop never waits): readings that come before it
    /// are detected under the assignment the station holds, as they would be without a recorder.
    func requestAssignment(of station: String) {
        guard let recorder else { return }
        do {
            let id = try recorder.request(.assignmentGet, StationArgs(station: station))
            assignmentRequests[id] = (station, clock.monotonicSeconds() + options.recorderTimeoutS)
        } catch {
            assignmentsNotAnswered(reason: "\(error)")
        }
    }

    /// Says once that assignments are not checked against the recorder's.
    func assignmentsNotAnswered(reason: String) {
        guard !assignmentsUnanswered else { return }
        assignmentsUnanswered = true
        logger.warning(
            "no assignment from the session-recorder; stations keep the assignment they hold (a command published while this detector was down is not caught up)",
            metadata: ["reason": "\(reason)"])
    }

    /// Takes the recorder's latest assignment of `station`: when this detector missed it (newer
    /// than the last command it applied, and another command: `StationDetector.missedCommand`),
    /// it is applied where the command would have been, before the station's first sample
    /// message sent at or after it. At once when the readings fed have passed it; otherwise (a
    /// restored station whose readings since the checkpoint are still to come from the bridges'
    /// journals) when such a message comes, so readings sent before it keep the assignment
    /// they were lifted under.
    func caughtUp(_ stored: AssignmentRecord?, station: String) throws {
        guard let stored, handover.isProcessing, let slot = stations[station], slot.detector.missedCommand(stored) != nil else { return }
        if slot.missed == nil { missedWaiting += 1 }
        stations[station]?.missed = stored
        if slot.fedTs >= stored.ts { try applyMissed(at: station) }
    }

    /// Applies the station's missed assignment (`caughtUp`), as the command would have been
    /// applied; checkpointed at once, as a command is.
    func applyMissed(at station: String) throws {
        guard let stored = stations[station]?.missed, let athleteBefore = stations[station].map({ $0.detector.assignment.athlete }) else { return }
        stations[station]?.missed = nil
        missedWaiting -= 1
        let result: (command: CommandMessage, outputs: [DetectorOutput])?
        do { result = try stations[station]?.detector.catchUp(on: stored) } catch {
            logger.warning(
                "stored assignment not applied", metadata: ["station": "\(station)", "correlation_id": "\(stored.cmdId ?? "")", "error": "\(error)"])
            return
        }
        // A command applied since (newer) has made it moot.
        guard let (command, outputs) = result else { return }
        changed = true
        checkpointDue = 0
        logger.notice(
            "assignment caught up from the recorder",
            metadata: [
                "station": "\(station)", "correlation_id": "\(command.id)", "command": "\(stored.command ?? "")",
                "athlete": "\(stations[station]?.detector.assignment.athlete ?? "")", "ts": "\(stored.ts)",
            ])
        for output in outputs {
            if case .pattern(let pattern) = output { learn(pattern) } else { try publish(output, athlete: athleteBefore) }
        }
    }

    /// Takes whatever the recorder has answered (never waits); forgets a
    /// question unanswered for `recorderTimeoutS`.
    func collectReplies() throws {
        guard let recorder, patterns.question != nil || !assignmentRequests.isEmpty || !patternOffers.isEmpty else { return }
        // Assignments are applied once the replies are read: what they make is published, and
        // a failure to publish is the loop's, not the recorder's.
        var assignments: [(station: String, stored: AssignmentRecord?)] = []
        do {
            while let reply = try recorder.nextReply() {
                if patternOffers.removeValue(forKey: reply.id) != nil {
                    do { _ = try QueryClient.decode(reply.data, of: .patternPut) } catch { patternsNotKept(1, reason: "\(error)") }
                    continue
                }
                if let asked = assignmentRequests.removeValue(forKey: reply.id) {
                    do {
                        assignments.append((asked.station, try QueryClient.decode(reply.data, of: .assignmentGet)))
                    } catch {
                        assignmentsNotAnswered(reason: "\(error)")
                    }
                    continue
                }
                guard patterns.answers(reply.id) else { continue }  // an answer given up on
                do {
                    let stored = try QueryClient.decode(reply.data, of: .patternList)
                    _ = patterns.answered(stored)
                    logger.info("patterns fetched from the session-recorder", metadata: ["patterns": "\(stored.count)"])
                } catch {
                    _ = patterns.giveUp()
                    logger.info("no patterns from the session-recorder", metadata: ["reason": "\(error)"])
                }
            }
        } catch {
            if patterns.giveUp() { logger.info("no patterns from the session-recorder", metadata: ["reason": "\(error)"]) }
            if !assignmentRequests.isEmpty { assignmentsNotAnswered(reason: "\(error)") }
            assignmentRequests = [:]
            if !patternOffers.isEmpty { patternsNotKept(patternOffers.count, reason: "\(error)") }
            patternOffers = [:]
        }
        for (station, stored) in assignments { try caughtUp(stored, station: station) }
        let now = clock.monotonicSeconds()
        if patterns.expire(now: now) {
            logger.info("no patterns from the session-recorder", metadata: ["reason": "no answer within \(options.recorderTimeoutS) s; detecting without them"])
        }
        let expired = assignmentRequests.filter { now > $0.value.deadline }
        if !expired.isEmpty {
            for id in expired.keys { assignmentRequests[id] = nil }
            assignmentsNotAnswered(reason: "no answer within \(options.recorderTimeoutS) s")
        }
        let unconfirmed = patternOffers.filter { now > $0.value }
        if !unconfirmed.isEmpty {
            for id in unconfirmed.keys { patternOffers[id] = nil }
            patternsNotKept(unconfirmed.count, reason: "no answer within \(options.recorderTimeoutS) s")
        }
    }

    /// Says that `count` learned patterns were not confirmed as kept by the recorder (its first
    /// such and then every hundredth: a thousand sets end within seconds). The pattern is still
    /// used here and written to this detector's own file.
    func patternsNotKept(_ count: Int, reason: String) {
        let before = patternsNotKeptCount
        patternsNotKeptCount += count
        guard before == 0 || before / 100 != patternsNotKeptCount / 100 else { return }
        logger.warning(
            "learned patterns not kept by the session-recorder; this detector keeps them in its own file",
            metadata: ["count": "\(patternsNotKeptCount)", "reason": "\(reason)"])
    }

    /// Stores a learned pattern and gives every station the new library.
    func learn(_ pattern: RepPattern) {
        // Written with the next housekeeping, at most once a second (a thousand stations end
        // dozens of sets a second: the whole file each time was a tenth of the detector's work).
        let offered = patterns.learn(pattern, offer: recorder != nil)
        // Not waited for: the detector's loop never blocks on the recorder; the confirmation
        // is read by `collectReplies` whenever it comes.
        if let recorder, let offered {
            do {
                patternOffers[try recorder.request(.patternPut, offered)] = clock.monotonicSeconds() + options.recorderTimeoutS
            } catch {
                patternsNotKept(1, reason: "\(error)")
            }
        }
        logger.info("pattern learned", metadata: ["exercise": "\(pattern.exercise)", "reps": "\(pattern.reps)"])
    }

    /// Hands the library to the patterns writer when a pattern was learned
    /// (the file is written on its thread; a failed write is logged and retried
    /// with the next housekeeping).
    func savePatterns() {
        if let failure = patternsWriter.takeFailure() {
            logger.error("patterns not saved; retrying", metadata: ["path": "\(options.patternsPath ?? "")", "error": "\(failure)"])
            patterns.saveFailed()
        }
        guard let path = options.patternsPath, let library = patterns.takeUnsaved() else { return }
        patternsWriter.submit { try library.save(path: path) }
    }

    /// Waits until the patterns handed over are written: before this process ends (and in tests).
    func finishPatterns() {
        patternsWriter.wait()
        if let failure = patternsWriter.takeFailure() {
            logger.error("patterns not saved", metadata: ["path": "\(options.patternsPath ?? "")", "error": "\(failure)"])
        }
    }
}
