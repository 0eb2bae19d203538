import Testing

@testable import VBTBus
@testable import VBTForwarder

/// `BusMemoryBudget`'s policy, driven with given memory and queue readings (the
/// bus's own, with real connections, is tests/python/test_bus_memory.py).
@Suite("Bus memory budget")
struct MemoryBudgetTests {
    /// A budget of 100 MiB checked every 25 ms, a subscriber behind after 0.5 s:
    /// it acts from 87.5 MiB, on any subscriber behind from 93.75 MiB.
    private func budget() -> BusMemoryBudget { BusMemoryBudget(megabytes: 100) }
    private let mib = 1 << 20

    @Test("a publisher's messages not yet forwarded are held to an eighth of the budget in 1 KiB messages, never under 1,024")
    func inboundMark() {
        #expect(BusMemoryBudget.inboundMark(megabytes: 90) == 11_520)
        #expect(Int(BusMemoryBudget.inboundMark(megabytes: 512)) * 1_024 == 512 * mib / 8)
        #expect(BusMemoryBudget.inboundMark(megabytes: 1) == 1_024 && BusMemoryBudget.inboundMark(megabytes: 0) == 1_024)
        #expect(BusMemoryBudget.inboundMark(megabytes: Int.max) == Int32.max)
    }

    @Test("under seven eighths of the budget nothing is done, however far a subscriber is behind")
    func underBudget() {
        var budget = budget()
        for step in 0..<100 {
            let decision = budget.check(now: Double(step) * 0.05, queued: [7: 4_000_000, 8: 0], resident: { 87 * mib }, trim: {})
            #expect(decision == nil)
        }
        #expect(budget.disconnections == 0)
        #expect(budget.peakBytes == 87 * mib)
    }

    @Test("near the budget, the subscriber whose queue has stayed non-empty longest is disconnected, never one that empties it")
    func furthestBehind() {
        var budget = budget()
        var resident = 60 * mib
        var decisions: [BusMemoryBudget.Decision] = []
        for step in 0..<40 {
            let now = Double(step) * 0.05
            // 7 keeps up (its queue empties every other check), 8 stopped at 0.2 s, 9 at 0.6 s.
            let queued: [Int32: Int] = [7: step % 2 == 0 ? 300_000 : 0, 8: now >= 0.2 ? 2_000_000 : 0, 9: now >= 0.6 ? 2_000_000 : 0]
            if step == 30 { resident = 90 * mib }
            if let decision = budget.check(now: now, queued: queued, resident: { resident }, trim: {}) { decisions.append(decision) }
        }
        #expect(decisions.first == .disconnect(8))
        #expect(!decisions.contains(.disconnect(7)))
        #expect(budget.disconnections == decisions.count { if case .disconnect = $0 { true } else { false } })
    }

    @Test("a subscriber behind for less than behindS is not disconnected: the budget says none is behind, once")
    func noneToDisconnectSaidOnce() {
        var budget = budget()
        var decisions: [BusMemoryBudget.Decision?] = []
        for step in 0..<6 {
            let now = Double(step) * 0.05
            decisions.append(budget.check(now: now, queued: [7: 1_000], resident: { 90 << 20 }, trim: {}))
        }
        #expect(decisions.compactMap { $0 } == [.noneToDisconnect])
        // Back under, then near the budget again: said again.
        _ = budget.check(now: 0.30, queued: [:], resident: { 50 << 20 }, trim: {})
        #expect(budget.check(now: 0.35, queued: [:], resident: { 90 << 20 }, trim: {}) == .noneToDisconnect)
    }

    @Test("what the subscribers said is asked for only past seven eighths of the budget, once a check")
    func prioritiesAskedOnlyNearTheBudget() {
        var budget = budget()
        var asked = 0
        let said = {
            asked += 1
            return [Int32(8): BusPriority.bulk]
        }
        for step in 0..<20 {
            _ = budget.check(now: Double(step) * 0.05, queued: [7: 1_000, 8: 1_000], priorities: said, resident: { 50 << 20 }, trim: {})
        }
        #expect(asked == 0, "under seven eighths (87.5 of 100 MiB) the queues are followed, and nobody's priority looked up")
        // Behind since 0 s: at 1.0 s, past 7/8, the bulk one goes, its priority asked once.
        #expect(budget.check(now: 1.0, queued: [7: 1_000, 8: 1_000], priorities: said, resident: { 90 << 20 }, trim: {}) == .disconnect(8))
        #expect(asked == 1)
    }

    @Test("past fifteen sixteenths of the budget, the subscriber behind longest goes even before behindS; one whose queue is empty never")
    func pastTheBudget() {
        var budget = budget()
        // 7 empty, 8 behind since 0.1 s, 9 since 0.2 s: at 0.3 s none has been behind behindS (0.5 s).
        var decisions: [BusMemoryBudget.Decision] = []
        for step in 0...6 {
            let now = Double(step) * 0.05
            let queued: [Int32: Int] = [7: 0, 8: now >= 0.1 ? 2_000_000 : 0, 9: now >= 0.2 ? 2_000_000 : 0]
            let resident = step < 6 ? 90 * mib : 94 * mib
            if let decision = budget.check(now: now, queued: queued, resident: { resident }, trim: {}) { decisions.append(decision) }
        }
        #expect(decisions == [.noneToDisconnect, .disconnect(8)], "at 90 MiB it waits; at 94 (past 93.75) 8 goes")
    }

    @Test("after a disconnection, the freed heap is given back before the memory is read again, and the next waits its settling time")
    func settlesAndTrims() {
        var budget = budget()
        var resident = 92 * mib
        var trims = 0
        var decisions: [(Double, BusMemoryBudget.Decision)] = []
        var connected: [Int32: Int] = [3: 1_000_000, 4: 1_000_000]
        for step in 0..<40 {
            let now = Double(step) * 0.05
            let trim = {
                trims += 1
                resident -= 1 * mib  // a little comes back each time: still past where it acts
            }
            if let decision = budget.check(now: now, queued: connected, resident: { resident }, trim: trim) {
                decisions.append((now, decision))
                if case .disconnect(let link) = decision { connected[link] = nil }
            }
        }
        // Both behind from 0 s (not yet for behindS, so none is said behind): at 0.5 s the first (3),
        // the second (4) after 3's settling and a trim that left the bus over its budget.
        #expect(decisions.map(\.1) == [.noneToDisconnect, .disconnect(3), .disconnect(4)])
        #expect(abs(decisions[1].0 - 0.5) < 1e-9)
        #expect(decisions[2].0 >= decisions[1].0 + budget.settleS - 1e-9)
        #expect(trims >= 1)
        #expect(budget.disconnections == 2)
    }

    @Test("near the budget, freed heap is given back before a subscriber is chosen, at most every trimRetryS; nobody goes if that brings it under")
    func trimsBeforeChoosing() {
        var budget = budget()
        var resident = 90 * mib
        var trims = 0
        var decisions: [BusMemoryBudget.Decision] = []
        for step in 0..<40 {
            let now = Double(step) * 0.05
            // The bus holds 5 MiB of freed heap again a tenth of a second after each trim; 7 stays behind.
            if step % 2 == 0 { resident = 90 * mib }
            let trim = {
                trims += 1
                resident = 85 * mib
            }
            if let decision = budget.check(now: now, queued: [7: 2_000_000], resident: { resident }, trim: trim) { decisions.append(decision) }
        }
        // At 0 s a trim brings it under. Back at 90 MiB at 0.1 s with no trim due before 1 s: none is behind
        // for behindS yet (said once), and at 0.5 s 7 is, and goes.
        #expect(trims >= 2)
        #expect(Array(decisions.prefix(2)) == [.noneToDisconnect, .disconnect(7)])
        var held = BusMemoryBudget(megabytes: 100)
        var heldTrims = 0
        for step in 0..<40 {
            // Freed heap alone: each trim brings it under, and it stays there.
            let decision = held.check(
                now: Double(step) * 0.05, queued: [7: 2_000_000], resident: { heldTrims > 0 ? 80 * (1 << 20) : 90 * (1 << 20) },
                trim: { heldTrims += 1 })
            #expect(decision == nil)
        }
        #expect(heldTrims == 1 && held.disconnections == 0 && held.peakBytes == 90 * mib)
    }

    @Test("checks run every checkIntervalS, not at every poll")
    func interval() {
        var budget = budget()
        var reads = 0
        for step in 0..<1_000 {
            _ = budget.check(
                now: Double(step) * 0.001, queued: [:],
                resident: {
                    reads += 1; return 1
                }, trim: {})
        }
        #expect(reads == 40)
    }

    @Test("while a disconnection settles it waits, unless the memory comes within a thirty-second of the budget")
    func settlingYieldsToTheCeiling() {
        var budget = budget()
        let queued: [Int32: Int] = [3: 1_000_000, 4: 1_000_000, 5: 1_000_000]
        // Past fifteen sixteenths: 3 goes at once (behind longest, the lowest descriptor among equals).
        #expect(budget.check(now: 0, queued: queued, resident: { 94 * mib }, trim: {}) == .disconnect(3))
        // Still growing within the settling time: nothing, until it is within 3.125 MiB of the budget.
        #expect(budget.check(now: 0.025, queued: [4: 1_000_000, 5: 1_000_000], resident: { 96 * mib }, trim: {}) == nil)
        #expect(budget.check(now: 0.05, queued: [4: 1_000_000, 5: 1_000_000], resident: { 97 * mib }, trim: {}) == .disconnect(4))
        #expect(budget.peakBytes == 97 * mib)
        #expect(budget.disconnections == 2)
    }
}

/// Whom the budget disconnects first, by what the subscribers said they are (`BusPriority`).
@Suite("Bus memory budget: priorities")
struct MemoryBudgetPriorityTests {
    private let mib = 1 << 20

    @Test("of the subscribers behind, one that said bulk goes first and one that said realtime last, however long each has been behind")
    func priorityBeforeTime() {
        var budget = BusMemoryBudget(megabytes: 100)
        // 7 (realtime) stopped first, 8 (normal) next, 9 (bulk) last; all three are behind by 1.5 s.
        let priorities: [Int32: BusPriority] = [7: .realtime, 9: .bulk]
        var order: [Int32] = []
        var queued: [Int32: Int] = [:]
        for step in 0..<80 {
            let now = Double(step) * 0.05
            for (link, stopped) in [(Int32(7), 0.0), (8, 0.2), (9, 0.4)] where now >= stopped && !order.contains(link) { queued[link] = 2_000_000 }
            if let decision = budget.check(now: now, queued: queued, priorities: { priorities }, resident: { now >= 1.5 ? 95 << 20 : 50 << 20 }, trim: {}),
                case .disconnect(let link) = decision
            {
                order.append(link)
                queued[link] = nil
            }
        }
        #expect(order == [9, 8, 7])
    }

    @Test("a realtime subscriber stopped for good goes while a bulk one keeping up holds it back, from fifteen sixteenths: the budget is the ceiling")
    func realtimeStoppedStillGoes() {
        var budget = BusMemoryBudget(megabytes: 100)
        var decisions: [(Double, BusMemoryBudget.Decision)] = []
        for step in 0..<40 {
            let now = Double(step) * 0.05
            // 7 (realtime) stopped; 8 (bulk) keeps up, its queue empty every other check. 90 MiB, 95 from 1.0 s
            // until 7 is gone.
            let gone = decisions.contains { $0.1 == .disconnect(7) }
            var queued: [Int32: Int] = [8: step % 2 == 0 ? 100_000 : 0]
            if !gone { queued[7] = 2_000_000 }
            let resident = now >= 1.0 && !gone ? 95 * mib : 90 * mib
            if let decision = budget.check(now: now, queued: queued, priorities: { [7: .realtime, 8: .bulk] }, resident: { resident }, trim: {}) {
                decisions.append((now, decision))
            }
        }
        let disconnections = decisions.filter { $0.1 != .noneToDisconnect }
        #expect(disconnections.first?.1 == .disconnect(7) && (disconnections.first?.0 ?? 0) >= 1.0, "\(decisions)")
        #expect(!disconnections.contains { $0.1 == .disconnect(8) })
    }

    @Test("short of fifteen sixteenths, a realtime subscriber behind longer waits while a normal one is behind: the normal one goes first")
    func realtimeWaitsForTheOthers() {
        var budget = BusMemoryBudget(megabytes: 100)
        var decisions: [(Double, BusMemoryBudget.Decision)] = []
        for step in 0..<30 {
            let now = Double(step) * 0.05
            // 7 (realtime) behind from the start; 8 (normal) from 0.6 s; at 90 MiB from 0.9 s.
            let queued: [Int32: Int] = [7: 2_000_000, 8: now >= 0.6 ? 2_000_000 : 0]
            let resident = now >= 0.9 ? 90 * mib : 50 * mib
            if let decision = budget.check(now: now, queued: queued, priorities: { [7: .realtime] }, resident: { resident }, trim: {}) {
                decisions.append((now, decision))
                if case .disconnect = decision { break }
            }
        }
        #expect(decisions.first?.1 == .noneToDisconnect && abs((decisions.first?.0 ?? 0) - 0.9) < 1e-9, "at 0.9 s, 8 behind 0.3 s: nobody yet")
        #expect(decisions.last?.1 == .disconnect(8) && abs((decisions.last?.0 ?? 0) - 1.1) < 1e-9, "\(decisions)")
    }

    @Test("short of fifteen sixteenths, a normal subscriber behind long waits while a bulk one's queue holds anything, however briefly")
    func normalWaitsForBulk() {
        var budget = BusMemoryBudget(megabytes: 100)
        var decisions: [BusMemoryBudget.Decision] = []
        for step in 0..<40 {
            let now = Double(step) * 0.05
            // 7 (normal) behind from the start; 8 (bulk) connected again at 1.0 s, its queue empty every third check.
            let queued: [Int32: Int] = [7: 2_000_000, 8: now >= 1.0 && step % 3 != 0 ? 2_000_000 : 0]
            if let decision = budget.check(now: now, queued: queued, priorities: { [8: .bulk] }, resident: { now >= 1.0 ? 90 << 20 : 50 << 20 }, trim: {}) {
                decisions.append(decision)
            }
        }
        #expect(decisions.first == .noneToDisconnect)
        // 8 is never behind for behindS at once, and 7 waits for it: nobody goes.
        #expect(decisions == [.noneToDisconnect])
    }

    @Test("short of fifteen sixteenths, a bulk subscriber connected again holds a normal one back for behindS, though its queue is empty")
    func freshBulkHoldsNormalBack() {
        var budget = BusMemoryBudget(megabytes: 100)
        var decisions: [(Double, BusMemoryBudget.Decision)] = []
        for step in 0..<40 {
            let now = Double(step) * 0.05
            // 7 (normal) behind from the start; 8 (bulk) connects at 1.0 s, empty until 1.3 s, then behind. 90 MiB from 1.0 s.
            var queued: [Int32: Int] = [7: 2_000_000]
            if now >= 1.0 { queued[8] = now >= 1.3 ? 2_000_000 : 0 }
            if let decision = budget.check(now: now, queued: queued, priorities: { [8: .bulk] }, resident: { now >= 1.0 ? 90 << 20 : 50 << 20 }, trim: {}) {
                decisions.append((now, decision))
                if case .disconnect = decision { break }
            }
        }
        #expect(decisions.first?.1 == .noneToDisconnect, "\(decisions)")
        #expect(decisions.last?.1 == .disconnect(8) && abs((decisions.last?.0 ?? 0) - 1.8) < 1e-9, "\(decisions)")
    }

    @Test("short of fifteen sixteenths, a normal subscriber behind waits while a bulk one is connected, however long its queue stays empty; from there it goes")
    func connectedBulkHoldsNormalBack() {
        var budget = BusMemoryBudget(megabytes: 100)
        var decisions: [(Double, BusMemoryBudget.Decision)] = []
        for step in 0..<60 {
            let now = Double(step) * 0.05
            // 7 (normal) behind from the start; 8 (bulk) connected, its queue always empty (a recorder
            // connected again, libzmq's queue in its own process still filling). 90 MiB, 95 from 2.0 s.
            let queued: [Int32: Int] = [7: 2_000_000, 8: 0]
            let resident = now >= 2.0 - 1e-9 ? 95 * mib : 90 * mib
            if let decision = budget.check(now: now, queued: queued, priorities: { [8: .bulk] }, resident: { resident }, trim: {}) {
                decisions.append((now, decision))
                if case .disconnect = decision { break }
            }
        }
        #expect(decisions.first?.1 == .noneToDisconnect, "\(decisions)")
        #expect(decisions.count == 2 && decisions.last?.1 == .disconnect(7) && abs((decisions.last?.0 ?? 0) - 2.0) < 1e-9, "\(decisions)")
    }

    @Test("a bulk subscriber disconnected holds a normal one back until it is connected again, or for rejoinS")
    func disconnectedBulkHoldsNormalBack() {
        var budget = BusMemoryBudget(megabytes: 100)
        var decisions: [(Double, BusMemoryBudget.Decision)] = []
        var queued: [Int32: Int] = [7: 2_000_000, 8: 2_000_000]
        for step in 0..<200 {
            let now = Double(step) * 0.05
            // 7 (normal) and 8 (bulk) behind from the start; 90 MiB from 1.0 s. 8 goes first and never
            // connects again; 7 waits rejoinS for it.
            if let decision = budget.check(
                now: now, queued: queued, priorities: { [8: .bulk] }, resident: { now >= 1.0 - 1e-9 ? 90 * mib : 50 * mib }, trim: {})
            {
                decisions.append((now, decision))
                if case .disconnect(let link) = decision { queued[link] = nil }
                if decision == .disconnect(7) { break }
            }
        }
        let disconnections = decisions.filter { $0.1 != .noneToDisconnect }
        #expect(disconnections.map(\.1) == [.disconnect(8), .disconnect(7)], "\(decisions)")
        #expect(abs(disconnections[0].0 - 1.0) < 1e-9, "\(decisions)")
        #expect(disconnections[1].0 >= 1.0 + budget.rejoinS - 1e-9 && disconnections[1].0 <= 1.0 + budget.rejoinS + 0.05 + 1e-9, "\(decisions)")
    }

    @Test("the subscription that says a priority: no topic starts with it, read back as said, an unknown word is normal")
    func declaration() {
        #expect(BusPriority.normal.subscription == nil)
        for priority in [BusPriority.bulk, .realtime] {
            let said = Array(priority.subscription!.utf8)
            #expect(said.first == 0x7F, "starts with DEL, which no topic (printable ASCII) does")
            #expect(said.withUnsafeBytes { BusPriority.declared(by: $0) } == priority)
        }
        #expect(Array("\u{7F}vbt.priority=urgent".utf8).withUnsafeBytes { BusPriority.declared(by: $0) } == .normal)
        #expect(Array("sample.rack".utf8).withUnsafeBytes { BusPriority.declared(by: $0) } == nil)
        #expect(Array("".utf8).withUnsafeBytes { BusPriority.declared(by: $0) } == nil)
    }
}
