import Foundation
import Logging
import Testing
import VBTSensors
import VBTTesting

@testable import VBTBus
@testable import VBTWire

/// `InOrderInput` over the in-memory bus (a labelled test double) with a real
/// journal: a producer publishing samples, its replay endpoint and heartbeat (`ProducerRig`).
@Suite("in-order input")
struct InOrderTests {
    static let logger = Logger(label: "test") { _ in SwiftLogNoOpLogHandler() }

    @Test("a forged message with a stream's src and seq 2^53-1 is dropped once the producer says it never got that far: the stream goes on, nothing lost")
    func forgedSeq() throws {
        let rig = try Rig()
        let (bus, producer) = (rig.bus, rig.producer)
        func samples(_ count: Int) throws { try rig.samples(count) }
        func pump(_ passes: Int) throws {
            for _ in 0..<passes { try rig.pass(serve: true) }
        }
        try rig.beat()
        try samples(10)
        try pump(20)
        // An attacker copies the stream's src (visible on the bus) with seq 2^53 - 1.
        let journal = try #require(producer.journal)
        let src = try rig.src()
        let original = try #require(try journal.read(src: src, from: 1, to: 1).first)
        let forged = String(decoding: original.body, as: UTF8.self).replacingOccurrences(of: "\"seq\":1,", with: "\"seq\":9007199254740991,")
        #expect(forged.contains("9007199254740991"))
        try bus.publisherLink(lingerMs: 0).send(topic: original.topic, body: Array(forged.utf8))
        try samples(20)
        try pump(40)
        // Longer than the input ever waits for a hole (giveUpS): it must not skip ahead to the forgery.
        try pump(Int(rig.input.settings.giveUpS / 0.05) + 40)
        try samples(10)
        try pump(40)
        #expect(rig.delivered == Array(1...40), "every real message once, in order")
        #expect(rig.input.counters.lost == 0)
        #expect(rig.input.counters.ahead == 1)
        #expect(!rig.input.isRecovering)
    }

    @Test("a held seq a little past what the producer has published, which it never reaches: the hole is given up though the producer answers every question")
    func aheadOfProducerBounded() throws {
        let rig = try Rig()
        try rig.beat()
        try rig.samples(10)
        for _ in 0..<20 { try rig.pass(serve: true) }
        // A message copied with seq 15 (within a question's range of the producer's 10), and the producer falls idle.
        let journal = try #require(rig.producer.journal)
        let src = try rig.src()
        let original = try #require(try journal.read(src: src, from: 10, to: 10).first)
        let copy = String(decoding: original.body, as: UTF8.self).replacingOccurrences(of: "\"seq\":10,", with: "\"seq\":15,")
        try rig.bus.publisherLink(lingerMs: 0).send(topic: original.topic, body: Array(copy.utf8))
        for _ in 0..<Int(rig.input.settings.giveUpS / 0.05) - 40 { try rig.pass(serve: true) }
        #expect(rig.input.isRecovering, "waited for: the producer may publish 11-14 yet")
        for _ in 0..<80 { try rig.pass(serve: true) }
        #expect(!rig.input.isRecovering, "given up after giveUpS without a reply that filled any of it, not waited for forever")
        #expect(rig.input.counters.lost == 4 && rig.input.outstanding == 0, "\(rig.input.counters)")
        #expect(rig.delivered == Array(1...10) + [15])
    }

    @Test("a producer that answers every question after it has timed out still fills the hole: nothing lost, each message once, in order")
    func lateAnswers() throws {
        let rig = try Rig()
        rig.dropSamples(30...49)
        try rig.samples(100)
        // One question answered every 7 s of the clock, the oldest first: each answer comes after its
        // question has waited its answerTimeoutS (3 s) and been asked again; the hole is given up at 15 s.
        var sinceServed = 0.0
        for _ in 0..<600 {
            try rig.beat()
            try rig.pass(serve: false)
            if sinceServed >= 7 {
                _ = try rig.server.serve(limit: 1)
                sinceServed = 0
            }
            sinceServed += 0.05
        }
        #expect(rig.bus.dropped == 20)
        #expect(rig.delivered == Array(1...100), "every message once, in order")
        #expect(rig.input.counters.recovered == 20 && rig.input.counters.lost == 0, "\(rig.input.counters)")
        #expect(rig.input.counters.requests > 1, "the question was asked again while its answer was late")
    }

    @Test("what a hole still lacks is counted outstanding while it waits, and nothing once it is fetched")
    func outstandingWhileWaiting() throws {
        let rig = try Rig()
        rig.dropSamples(30...49)
        try rig.beat()
        try rig.samples(100)
        #expect(rig.input.outstanding == 0, "nothing received yet")
        for _ in 0..<10 { try rig.pass(serve: false) }
        #expect(rig.bus.dropped == 20)
        #expect(rig.delivered == Array(1...29))
        #expect(rig.input.outstanding == 20, "30-49 lack; 50-100 are held, not outstanding")
        #expect(rig.input.isRecovering(topic: "sample.rack-01") && !rig.input.isRecovering(topic: "sample.rack-02"))
        #expect(!rig.input.isRecovering(topic: "ack-01"), "a topic is matched whole, after the stream's '/'")
        for _ in 0..<40 { try rig.pass(serve: true) }
        #expect(rig.delivered == Array(1...100))
        #expect(rig.input.outstanding == 0 && rig.input.counters.lost == 0)
        #expect(!rig.input.isRecovering(topic: "sample.rack-01"))
    }

    @Test("the recovery pass runs at most every passIntervalS: a second stream's hole is asked for at the next pass, not at the next message")
    func passInterval() throws {
        let rig = try Rig()
        // The bus loses rack-01's 5th sample and rack-02's 3rd.
        var number = 0
        rig.bus.drop = { frames in
            guard frames.first?.starts(with: Array("sample.".utf8)) == true else { return false }
            number += 1
            return number == 5 || number == 13
        }
        func offer() throws {
            var message = HeartbeatMessage(role: "sensor-bridge", uptimeS: 1, intervalS: 1, inputs: nil)
            message.replay = rig.producer.replayOffer(endpoint: rig.server.endpoint)
            try rig.producer.publish(message, station: "bridge-rack-01")
        }
        func receiveAndPoll() throws {
            while let message = try rig.subscriber.next(timeoutMs: 0) {
                if message.envelope.type == HeartbeatMessage.type { rig.input.note(heartbeat: message) } else { _ = rig.input.accept(message) }
            }
            _ = rig.input.poll()
        }
        try rig.samples(10)
        try offer()
        try receiveAndPoll()
        #expect(rig.input.counters.requests == 1, "the first hole is asked for at once")
        let t = rig.bus.clock.wallSeconds()
        for k in 1...10 {
            try rig.producer.publish(
                SampleMessage(.distance([SampleMessage.DistanceReading(t: t + Double(k) * 0.02, distanceMm: 500)])), station: "rack-02", ts: t)
        }
        try offer()
        for _ in 0..<5 { try receiveAndPoll() }
        #expect(rig.input.counters.requests == 1, "within passIntervalS of the last pass, no pass: rack-02's hole waits")
        rig.bus.manualClock.advance(rig.input.settings.passIntervalS)
        try receiveAndPoll()
        #expect(rig.input.counters.requests == 2, "the next pass asks for it")
    }

    @Test("a late answer holding only the end of a hole, then the answer asked for: each message once, in order, nothing left held")
    func lateAnswerThenCurrent() throws {
        let rig = try Rig()
        // A replay endpoint answered by hand: the rig's own is never served, and the heartbeat points here.
        let endpoint = "memory://bridge-by-hand/replay"
        let link = rig.bus.serverLink(endpoint: endpoint)
        let journal = try #require(rig.producer.journal)
        func beatHere() throws {
            var message = HeartbeatMessage(role: "sensor-bridge", uptimeS: 1, intervalS: 1, inputs: nil)
            message.replay = rig.producer.replayOffer(endpoint: endpoint)
            try rig.producer.publish(message, station: "bridge-rack-01")
        }
        rig.dropSamples(30...49)
        try beatHere()
        try rig.samples(100)
        let src = try rig.src()
        func answer(_ request: ReceivedMessage, from: UInt64, to: UInt64) throws {
            let asked = try ReplayRequest(json: try #require(request.frames.last))
            let records = try journal.read(src: src, from: from, to: to)
            let header = ReplayHeader(
                id: asked.id, src: src, from: asked.from, to: asked.to, count: records.count, keptFrom: 1, keptTo: 100, more: false)
            let delimiter: [[UInt8]] = request.frames.count >= 3 ? [[]] : []
            try link.send([request.frames[0]] + delimiter + [header.json] + records.flatMap { [$0.topic, $0.body] }, dontWait: true)
        }
        var questions: [ReceivedMessage] = []
        var answered = false
        for pass in 0..<400 {
            try rig.pass(serve: false)
            if pass % 20 == 0 { try beatHere() }
            while let request = try link.receive(timeoutMs: 0, maxFrames: 4) { questions.append(request) }
            // The first question is answered only once it has been asked again, and then with the
            // hole's end alone (40-49); the second, at once after it, with all of it.
            if questions.count >= 2, !answered {
                try answer(questions[0], from: 40, to: 49)
                try answer(questions[1], from: 30, to: 49)
                answered = true
            }
        }
        #expect(answered)
        #expect(rig.bus.dropped == 20)
        #expect(rig.delivered == Array(1...100), "every message once, in order")
        #expect(rig.input.counters.recovered == 20 && rig.input.counters.lost == 0, "\(rig.input.counters)")
        #expect(!rig.input.isRecovering)
    }

    @Test("five streams with repeats and swapped neighbours: each delivered once, in order, repeats counted, nothing held or missing after")
    func repeatsAndSwaps() throws {
        let bus = MemoryBus()
        let input = InOrderInput(transport: bus, logger: Self.logger, wants: { $0.hasPrefix("sample.") })
        var stampers = (1...5).map { _ in EnvelopeStamper(program: "sensor-bridge") }
        var random = SeededGenerator(seed: 17)
        var arrivals: [BusMessage] = []
        for k in 0..<2_000 {
            let producer = Int(random.next() % 5)
            let sample = SampleMessage(.distance([SampleMessage.DistanceReading(t: Double(k), distanceMm: 500)]))
            let frames = try stampers[producer].encode(sample, station: "rack-0\(producer + 1)", athlete: nil, ts: 1_763_812_345)
            arrivals.append(try decodeMessage(topic: frames.topic, body: frames.body))
        }
        // Each message after the first of its stream may come twice, or swap places with the one before.
        var repeats = 0
        var index = 1
        while index < arrivals.count {
            switch random.next() % 10 {
            case 0:
                arrivals.insert(arrivals[index], at: index + 1)
                repeats += 1
                index += 2
            case 1 where arrivals[index - 1].envelope.seq > 1 && arrivals[index].envelope.seq > 1:  // a stream starts where it is first heard
                arrivals.swapAt(index - 1, index)
                index += 2
            default:
                index += 1
            }
        }
        var delivered: [String: [UInt64]] = [:]
        for message in arrivals {
            for ready in input.accept(message) { delivered[ready.envelope.src, default: []].append(ready.envelope.seq) }
        }
        #expect(delivered.count == 5)
        for (src, seqs) in delivered { #expect(seqs == Array(1...UInt64(seqs.count)), "\(src)") }
        #expect(delivered.values.map(\.count).reduce(0, +) == 2_000)
        #expect(input.counters.duplicates == repeats && input.held == 0 && !input.isRecovering)
    }

    @Test(
        "what is held behind holes stays within its budget over every stream: the fullest stream gives up its hole, counted lost, and what it held goes on in order"
    )
    func heldWithinBudget() throws {
        let bus = MemoryBus()
        var settings = InOrderInput.Settings()
        settings.maxHeldTotal = 10
        let input = InOrderInput(transport: bus, logger: Self.logger, settings: settings, wants: { $0.hasPrefix("sample.") })
        var stamper = EnvelopeStamper(program: "sensor-bridge")
        var delivered: [String: [UInt64]] = [:]
        var mostHeld = 0
        func send(_ station: String, keep: Bool = true) throws {
            let sample = SampleMessage(.distance([SampleMessage.DistanceReading(t: 1, distanceMm: 500)]))
            let frames = try stamper.encode(sample, station: station, athlete: nil, ts: 1_763_812_345)
            guard keep else { return }  // lost on the way: a hole
            for message in input.accept(try decodeMessage(topic: frames.topic, body: frames.body)) {
                delivered[message.envelope.station, default: []].append(message.envelope.seq)
            }
            mostHeld = max(mostHeld, input.held)
        }
        // Three stations, each a first message, a hole, then messages held behind it: 4, 5 and 6 of them.
        for (station, behind) in [("rack-01", 4), ("rack-02", 5), ("rack-03", 6)] {
            try send(station)
            try send(station, keep: false)
            for _ in 0..<behind { try send(station) }
        }
        #expect(mostHeld <= 10, "held \(mostHeld), over the budget of 10")
        // rack-03's second held message made 4 + 5 + 2 = 11: rack-02's hole (the fullest then) was given
        // up, its one message counted lost and the 5 it held delivered; rack-03 then held its 6.
        #expect(input.counters.lost == 1 && input.counters.overBudget == 1)
        #expect(delivered["rack-02"] == [1] + Array(3...7))
        #expect(delivered["rack-01"] == [1] && delivered["rack-03"] == [1])
        #expect(input.held == 10)
    }
}

extension InOrderTests {
    @Test("what is held knows its lowest seq through inserts, removals in order, out of order and of the last one")
    func heldLowest() throws {
        var held = InOrderInput.HeldMessages()
        var reference: Set<UInt64> = []
        var stamper = EnvelopeStamper(program: "sensor-bridge")
        let frames = try stamper.encode(
            SampleMessage(.distance([SampleMessage.DistanceReading(t: 1, distanceMm: 500)])), station: "rack-01", athlete: nil, ts: 1)
        let message = try decodeMessage(topic: frames.topic, body: frames.body)
        var random = SeededGenerator(seed: 17)
        for step in 0..<5_000 {
            let seq = UInt64.random(in: 1...400, using: &random)
            switch step % 5 {
            case 0, 1:
                held.insert(message, at: seq)
                reference.insert(seq)
            case 2:  // the lowest, as a stream is drained
                if let lowest = reference.min() {
                    #expect(held.remove(lowest) != nil)
                    reference.remove(lowest)
                }
            default:
                #expect((held.remove(seq) != nil) == (reference.remove(seq) != nil))
            }
            #expect(held.first == reference.min() && held.count == reference.count, "step \(step)")
        }
    }

    @Test("a producer working through its questions in order over a slow link is not asked again, and nothing is given up")
    func slowLinkWaitsItsTurn() throws {
        let rig = try Rig()
        // Eight stations of five messages each; each station's second lost on the way.
        rig.dropSamples(every: 5, the: 2)
        for station in 1...8 { try rig.samples(5, station: "rack-0\(station)") }
        rig.bus.drop = nil
        // One answer every 2 s of the clock, the oldest question first: the eighth comes after
        // 16 s, past answerTimeoutS (3 s) and giveUpS (15 s) from when it was asked.
        var sinceServed = 0.0
        for _ in 0..<400 where rig.input.counters.recovered < 8 {
            try rig.beat()
            try rig.pass(serve: false)
            if sinceServed >= 2 {
                _ = try rig.server.serve(limit: 1)
                sinceServed = 0
            }
            sinceServed += 0.05
        }
        #expect(rig.input.counters.recovered == 8 && rig.input.counters.lost == 0, "\(rig.input.counters)")
        #expect(rig.input.counters.requests == 8, "each hole asked for once: \(rig.input.counters.requests) questions")
        #expect(rig.delivered.count == 40 && rig.input.held == 0 && rig.input.outstanding == 0)
    }

    @Test("a producer that has answered before and then answers nothing for 20 s (a slow link) is waited for, asked again less and less often")
    func slowLinkUnanswered() throws {
        let rig = try Rig()
        rig.dropSamples(3...3)
        try rig.samples(10)
        for _ in 0..<20 { try rig.pass(serve: true) }
        #expect(rig.delivered == Array(1...10) && rig.input.counters.recovered == 1)
        let asked = rig.input.counters.requests
        rig.dropSamples(3...3)
        try rig.samples(10)
        // 20 s of the clock: the producer beats, its answers do not come.
        for _ in 0..<400 {
            try rig.beat()
            try rig.pass(serve: false)
        }
        #expect(rig.input.counters.lost == 0 && rig.input.isRecovering, "waited for past giveUpS: \(rig.input.counters)")
        let repeats = rig.input.counters.requests - asked
        #expect(repeats <= 4, "asked at 0, 3, 9 and 21 s at most, not every 3 s: \(repeats)")
        for _ in 0..<40 { try rig.pass(serve: true) }
        #expect(rig.delivered == Array(1...20) && rig.input.counters.lost == 0, "\(rig.input.counters)")
    }

    @Test("at most maxQuestions questions in flight; a stream waiting its turn while the producer answers the others is not given up")
    func questionsBounded() throws {
        var settings = InOrderInput.Settings()
        settings.maxQuestions = 2
        settings.giveUpS = 0.1
        let rig = try Rig(settings: settings)
        // Six stations of five messages each (station after station); each station's second lost on the way.
        rig.dropSamples(every: 5, the: 2)
        for station in 1...6 { try rig.samples(5, station: "rack-0\(station)") }
        rig.bus.drop = nil
        var passes = 0
        var mostInFlight = 0
        // The producer answers one question a pass (50 ms): six holes take longer than giveUpS.
        while rig.input.counters.recovered < 6, passes < 200 {
            try rig.pass(serve: true, serveLimit: 1)
            mostInFlight = max(mostInFlight, rig.input.questionsInFlight)
            passes += 1
        }
        #expect(mostInFlight == 2, "at most maxQuestions asked at once, and that many while six wait")
        #expect(Double(passes) * 0.05 > settings.giveUpS, "recovery outlasted giveUpS (\(passes) passes)")
        #expect(rig.input.counters.recovered == 6 && rig.input.counters.lost == 0)
        #expect(rig.delivered.count == 30 && rig.input.held == 0 && rig.input.outstanding == 0)
    }
}

extension InOrderTests {
    @Test(
        "a hole no offer has named a producer for waits for the bus to beat unknownProducerBeats times, not on the consumer's clock alone; then the offer fills it"
    )
    func unknownProducerWaitsForBeats() throws {
        let rig = try Rig()
        rig.dropSamples(3...3)
        try rig.samples(10)
        // Five seconds of the consumer's clock (a backlog worked through), no heartbeat among what it read.
        try rig.work(passes: 100)
        #expect(rig.input.counters.lost == 0 && rig.delivered == [1, 2], "\(rig.input.counters)")
        // The producer's offer comes: the hole is fetched.
        for _ in 0..<20 { try rig.pass(serve: true) }
        #expect(rig.delivered == Array(1...10) && rig.input.counters.recovered == 1 && rig.input.counters.lost == 0)
    }

    @Test("a hole no offer names is given up once unknownProducerS has passed and the bus has beaten unknownProducerBeats times")
    func unknownProducerGivenUp() throws {
        let rig = try Rig()
        rig.dropSamples(3...3)
        try rig.samples(10)
        // Four seconds of the consumer's clock, the bus beating twice: still waited for.
        try rig.work(passes: 80, busBeatEvery: 40)
        #expect(rig.input.counters.lost == 0, "two beats: still waited for")
        // The third beat: the hole is counted lost and the rest delivered.
        try rig.work(passes: 40, busBeatEvery: 40)
        #expect(rig.input.counters.lost == 1 && rig.delivered == [1, 2] + Array(4...10), "\(rig.input.counters)")
    }
}

extension InOrderTests {
    @Test("a hole in a stream whose producer's heartbeat offers no journal is given up at the next pass, not after unknownProducerS")
    func journallessGivenUpAtOnce() throws {
        let rig = try Rig()
        // The producer's heartbeat without a replay offer: it keeps no journal.
        try rig.heartbeat.tick(rig.producer, inputs: nil, replay: nil)
        rig.dropSamples(3...3)
        try rig.samples(10)
        try rig.work(passes: 2)
        #expect(rig.input.counters.lost == 1 && rig.delivered == [1, 2] + Array(4...10), "\(rig.input.counters)")
    }

    @Test("a producer that offers its journal again is waited for as before")
    func journalOfferedAgain() throws {
        let rig = try Rig()
        try rig.heartbeat.tick(rig.producer, inputs: nil, replay: nil)
        rig.bus.manualClock.advance(1.1)
        try rig.beat()
        rig.dropSamples(3...3)
        try rig.samples(10)
        for _ in 0..<60 { try rig.pass(serve: true) }
        #expect(rig.input.counters.lost == 0 && rig.input.counters.recovered == 1, "\(rig.input.counters)")
        #expect(rig.delivered == Array(1...10), "\(rig.delivered)")
    }
}

extension InOrderTests {
    @Test("past the budget, holes are given up until an eighth of it is free: one look through the streams for many messages")
    func budgetFreesAnEighth() throws {
        var settings = InOrderInput.Settings()
        settings.maxHeldTotal = 16
        let input = InOrderInput(transport: MemoryBus(), logger: Self.logger, settings: settings, wants: { $0.hasPrefix("sample.") })
        var stamper = EnvelopeStamper(program: "sensor-bridge")
        // Seventeen streams, each a first message, one lost, and one held behind it.
        for station in 1...17 {
            for keep in [true, false, true] {
                let sample = SampleMessage(.distance([SampleMessage.DistanceReading(t: 1, distanceMm: 500)]))
                let frames = try stamper.encode(sample, station: "rack-\(station)", athlete: nil, ts: 1_763_812_345)
                if keep { _ = input.accept(try decodeMessage(topic: frames.topic, body: frames.body)) }
            }
        }
        // The seventeenth held message passed the budget of 16: three holes given up, 14 held (16 - 16 / 8).
        #expect(input.held == 14 && input.counters.overBudget == 3 && input.counters.lost == 3, "\(input.counters), \(input.held) held")
    }
}

extension InOrderTests {
    /// The producer (`ProducerRig`) and an `InOrderInput` fed by a subscriber.
    final class Rig: ProducerRig {
        let subscriber: Subscriber
        let input: InOrderInput
        /// The seqs the input delivered, in order.
        var delivered: [UInt64] = []

        init(settings: InOrderInput.Settings = InOrderInput.Settings()) throws {
            let bus = MemoryBus()
            subscriber = try Subscriber(transport: bus, prefixes: ["sample.", "heartbeat."], logger: InOrderTests.logger)
            input = InOrderInput(transport: bus, logger: InOrderTests.logger, settings: settings, wants: { $0.hasPrefix("sample.") })
            try super.init(bus: bus)
        }

        /// What arrived goes to the input and the input polls, `passes` times, 50 ms of the
        /// clock apart: the producer neither beats nor answers; the bus beats every `busBeatEvery`th.
        func work(passes: Int, busBeatEvery: Int? = nil) throws {
            for number in 1...passes {
                if let every = busBeatEvery, number % every == 0 { try bus.heartbeat() }
                try takeArrived()
                bus.manualClock.advance(0.05)
            }
        }

        /// What arrived goes to the input (heartbeats noted), then the input polls.
        private func takeArrived() throws {
            while let message = try subscriber.next(timeoutMs: 0) {
                if message.envelope.type == HeartbeatMessage.type {
                    input.note(heartbeat: message)
                } else {
                    delivered += input.accept(message).map(\.envelope.seq)
                }
            }
            delivered += input.poll().map(\.envelope.seq)
        }

        /// The producer's heartbeat, when due.
        func beat() throws { try heartbeat.tick(producer, inputs: nil, replay: server) }

        /// The bus loses the `the`th of every `every` sample messages (from 1, in the order sent).
        func dropSamples(every: Int, the: Int) {
            var number = 0
            bus.drop = { frames in
                guard frames.first?.starts(with: Array("sample.".utf8)) == true else { return false }
                number += 1
                return number % every == the
            }
        }

        /// The bus loses the sample messages numbered `numbers` (from 1, in the order sent).
        func dropSamples(_ numbers: ClosedRange<Int>) {
            var number = 0
            bus.drop = { frames in
                guard frames.first?.starts(with: Array("sample.".utf8)) == true else { return false }
                number += 1
                return numbers.contains(number)
            }
        }

        /// One pass: what arrived goes to the input, the input polls, the producer
        /// answers (with `serve`), 50 ms of the clock pass and a heartbeat when due.
        func pass(serve: Bool, serveLimit: Int = 10) throws {
            try takeArrived()
            if serve { _ = try server.serve(limit: serveLimit) }
            bus.manualClock.advance(0.05)
            try beat()
        }
    }
}
