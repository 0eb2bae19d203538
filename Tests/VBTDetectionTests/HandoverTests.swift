import Foundation
import Testing

@testable import VBTBus
@testable import VBTDetection
@testable import VBTDetectorRole
@testable import VBTWire

/// The hand-over alone: messages and time in, actions out; no bus, no clock, no process.
/// (DetectorRuntimeTests and SwapProcessTests run it inside the runtime and between processes.)
@Suite("hand-over, as a state machine")
struct HandoverTests {
    typealias Machine = Handover<StationDetector>

    /// Input messages as a bridge sends them: commands at `station`, stamped by `stamper`.
    static func input(_ stamper: inout EnvelopeStamper, station: String, count: Int) throws -> [BusMessage] {
        try (0..<count).map { index in
            let frames = try stamper.encode(CommandMessage(id: "c\(index)", command: "set.end"), station: station, ts: 1_800_000_000 + Double(index))
            return try decodeMessage(topic: frames.topic, body: frames.body)
        }
    }

    static func request(from instance: String, firstSeq: [String: Int] = [:]) -> TakeoverMessage {
        TakeoverMessage(instance: instance, stations: "*", firstSeq: firstSeq)
    }

    /// A new side that has buffered `messages` and sent its request at `now`.
    static func requested(_ messages: [BusMessage], now: Double = 100) -> Machine {
        var machine = Machine(instance: "new", takingOver: true, timeoutS: 10)
        for message in messages { _ = machine.take(message) }
        machine.requestSent(now: now)
        return machine
    }

    /// An old side handing over to `new`, asked at `now` for streams `targets`.
    static func handingOver(targets: [String: Int], now: Double = 100) -> Machine {
        var machine = Machine(instance: "old", takingOver: false, timeoutS: 10)
        let accepted = machine.request(request(from: "new", firstSeq: targets), ours: true, now: now)
        #expect(accepted)
        return machine
    }

    @Test("the new side buffers its input, and asks once the bus is heard, with each stream's first buffered seq")
    func asks() throws {
        var rack1 = EnvelopeStamper(program: "bridge-1")
        var rack2 = EnvelopeStamper(program: "bridge-2")
        _ = try Self.input(&rack1, station: "rack-1", count: 3)  // sent before the new side subscribed
        let buffered = try Self.input(&rack1, station: "rack-1", count: 2) + Self.input(&rack2, station: "rack-2", count: 2)
        var machine = Machine(instance: "new", takingOver: true, timeoutS: 10)
        for message in buffered {
            let taken = machine.take(message)
            #expect(!taken, "buffered, not processed")
        }
        #expect(machine.buffer.count == 4)
        let unheard = machine.tick(now: 1, busHeard: false, position: { _ in 0 })
        #expect(unheard == nil, "the bus not heard yet: nobody would hear the request")
        guard case .requestTakeover(let first)? = machine.tick(now: 1.1, busHeard: true, position: { _ in 0 }) else {
            Issue.record("no request")
            return
        }
        #expect(buffered[0].envelope.seq == 4, "three of rack-1's were sent before")
        #expect(first == [buffered[0].envelope.src: 4, buffered[2].envelope.src: 1])
        #expect(machine.phase == .takingOver(requested: false, deadline: .infinity), "the wait starts once the request went out")
        // Not sent (nobody subscribed yet): asked for again.
        guard case .requestTakeover? = machine.tick(now: 1.2, busHeard: true, position: { _ in 0 }) else {
            Issue.record("not asked again")
            return
        }
        machine.requestSent(now: 1.25)
        #expect(machine.phase == .takingOver(requested: true, deadline: 11.25))
        let beforeDeadline = machine.tick(now: 11.2, busHeard: true, position: { _ in 0 })
        #expect(beforeDeadline == nil, "still waiting")
    }

    @Test("a new side with nothing buffered asks anyway, askEmptyAfterS after it first could not")
    func asksEmpty() {
        var machine = Machine(instance: "new", takingOver: true, timeoutS: 10)
        let wait = Machine.askEmptyAfterS
        let first = machine.tick(now: 50, busHeard: true, position: { _ in 0 })
        #expect(first == nil)
        let atWait = machine.tick(now: 50 + wait, busHeard: true, position: { _ in 0 })
        #expect(atWait == nil)
        guard case .requestTakeover(let first)? = machine.tick(now: 50 + wait + 0.01, busHeard: true, position: { _ in 0 }) else {
            Issue.record("no request")
            return
        }
        #expect(first.isEmpty)
    }

    @Test("nobody answering within the timeout, the new side starts fresh with its buffer, in order")
    func timeout() throws {
        var bridge = EnvelopeStamper(program: "bridge")
        let buffered = try Self.input(&bridge, station: "rack-1", count: 3)
        var machine = Self.requested(buffered, now: 100)
        let beforeTimeout = machine.tick(now: 109.9, busHeard: true, position: { _ in 0 })
        #expect(beforeTimeout == nil)
        guard case .startFresh(let buffer)? = machine.tick(now: 110, busHeard: true, position: { _ in 0 }) else {
            Issue.record("did not start fresh")
            return
        }
        #expect(buffer.map(\.envelope.seq) == buffered.map(\.envelope.seq))
        #expect(machine.phase == .active && machine.buffer.isEmpty)
        let processed = machine.take(buffered[0])
        #expect(processed, "input goes on to be processed")
        let late = machine.handoff(HandoffMessage(from: "old", to: "new", state: nil, done: true, positions: [:]))
        #expect(late == nil, "a late hand-off is ignored")
    }

    @Test("the new side keeps each state handed to it, leaves out others' and unreadable ones, and completes on the done")
    func completes() throws {
        var bridge = EnvelopeStamper(program: "bridge")
        let buffered = try Self.input(&bridge, station: "rack-1", count: 2)
        var machine = Self.requested(buffered)
        // As the old side writes them: a fresh detector holds infinities ("no rep yet").
        let encoder = JSONEncoder()
        encoder.nonConformingFloatEncodingStrategy = .convertToString(positiveInfinity: "inf", negativeInfinity: "-inf", nan: "nan")
        let state = { (station: String) in String(decoding: try encoder.encode(StationDetector(station: station)), as: UTF8.self) }
        let own = machine.handoff(HandoffMessage(from: "old", to: "new", state: try state("rack-1"), done: false, positions: [:]))
        #expect(own == nil)
        let others = machine.handoff(HandoffMessage(from: "old", to: "other", state: try state("rack-2"), done: false, positions: [:]))
        #expect(others == nil)
        let unreadable = machine.handoff(HandoffMessage(from: "old", to: "new", state: "{not json", done: false, positions: [:]))
        #expect(unreadable == nil)
        let othersDone = machine.handoff(HandoffMessage(from: "old", to: "other", state: nil, done: true, positions: [:]))
        #expect(othersDone == nil, "another's done")
        #expect(Set(machine.states.keys) == ["rack-1"])
        let positions = [buffered[0].envelope.src: Int(buffered[0].envelope.seq) - 1]
        guard
            case .complete(let states, let handed, let from, let buffer)? = machine.handoff(
                HandoffMessage(from: "old", to: "new", state: nil, done: true, positions: positions))
        else {
            Issue.record("not completed")
            return
        }
        #expect(Set(states.keys) == ["rack-1"] && states["rack-1"]?.station == "rack-1")
        #expect(handed == positions && from == "old")
        #expect(buffer.map(\.envelope.seq) == buffered.map(\.envelope.seq))
        #expect(machine.phase == .active && machine.buffer.isEmpty && machine.states.isEmpty)
    }

    @Test("the old side hands over once every stream has passed the new side's first point, not before")
    func handsOver() throws {
        var bridge = EnvelopeStamper(program: "bridge")
        let message = try Self.input(&bridge, station: "rack-1", count: 1)[0]
        var machine = Self.handingOver(targets: ["a/sample.rack-1": 10, "b/sample.rack-2": 5])
        var positions = ["a/sample.rack-1": 8, "b/sample.rack-2": 4]
        let processed = machine.take(message)
        #expect(processed, "it goes on processing meanwhile")
        let short = machine.tick(now: 101, busHeard: true, position: { positions[$0] ?? 0 })
        #expect(short == nil, "rack-1 is short of 9")
        positions["a/sample.rack-1"] = 9
        guard case .handOff(let to, let late)? = machine.tick(now: 101, busHeard: true, position: { positions[$0] ?? 0 }) else {
            Issue.record("no hand-off")
            return
        }
        #expect(to == "new" && !late)
        let states = ["rack-2": StationDetector(station: "rack-2"), "rack-1": StationDetector(station: "rack-1")]
        guard case .send(let messages, "new")? = machine.handOff(states: states, positions: positions) else {
            Issue.record("nothing to send")
            return
        }
        #expect(messages.map(\.station) == ["rack-1", "rack-2", "detector"], "each station's state, then the done")
        #expect(messages.allSatisfy { $0.message.from == "old" && $0.message.to == "new" })
        #expect(messages.map(\.message.done) == [false, false, true])
        #expect(messages.last?.message.positions == positions)
        let processedAfter = machine.take(message)
        #expect(machine.phase == .finished && !processedAfter, "handed over: nothing more is processed")
    }

    @Test("a stream that never reaches its point holds the old side up only handOverWithinS")
    func handsOverLate() {
        var machine = Self.handingOver(targets: ["a/sample.rack-1": 10], now: 100)
        let beforeDeadline = machine.tick(now: 100 + Machine.handOverWithinS - 0.01, busHeard: true, position: { _ in 3 })
        #expect(beforeDeadline == nil)
        guard case .handOff("new", let late)? = machine.tick(now: 100 + Machine.handOverWithinS, busHeard: true, position: { _ in 3 }) else {
            Issue.record("no hand-off at the deadline")
            return
        }
        #expect(late)
    }

    @Test("what the old side sends, the new side takes: the states come through whole")
    func roundTrip() throws {
        var old = Self.handingOver(targets: [:])
        var detector = StationDetector(station: "rack-1")
        detector.assignment.athlete = "ana"
        guard case .handOff? = old.tick(now: 100, busHeard: true, position: { _ in 0 }),
            case .send(let messages, _)? = old.handOff(states: ["rack-1": detector], positions: ["a/sample.rack-1": 41])
        else {
            Issue.record("no hand-off")
            return
        }
        var new = Self.requested([])
        var completed: Machine.Action?
        for (message, _) in messages { completed = new.handoff(message) }
        guard case .complete(let states, let positions, "old", _)? = completed else {
            Issue.record("not completed")
            return
        }
        #expect(states["rack-1"]?.assignment.athlete == "ana")
        #expect(positions == ["a/sample.rack-1": 41])
    }

    @Test("a state that cannot go on the wire aborts the hand-over, and the old side stays active")
    func abort() {
        var machine = Handover<Unencodable>(instance: "old", takingOver: false, timeoutS: 10)
        let accepted = machine.request(Self.request(from: "new"), ours: true, now: 0)
        #expect(accepted)
        guard case .handOff? = machine.tick(now: 0, busHeard: true, position: { _ in 0 }),
            case .abort(let to, _)? = machine.handOff(states: ["rack-1": Unencodable(station: "rack-1")], positions: [:])
        else {
            Issue.record("not aborted")
            return
        }
        #expect(to == "new" && machine.phase == .active)
        let later = machine.request(Self.request(from: "newer"), ours: true, now: 1)
        #expect(later, "a later request is taken")
    }

    @Test("requests for other stations, from itself, or while not active are ignored")
    func ignoredRequests() {
        var machine = Machine(instance: "old", takingOver: false, timeoutS: 10)
        let otherStations = machine.request(Self.request(from: "new"), ours: false, now: 0)
        #expect(!otherStations, "for other stations")
        let itsOwn = machine.request(Self.request(from: "old"), ours: true, now: 0)
        #expect(!itsOwn, "its own")
        #expect(machine.phase == .active)
        let accepted = machine.request(Self.request(from: "new"), ours: true, now: 0)
        #expect(accepted)
        let again = machine.request(Self.request(from: "newer"), ours: true, now: 0)
        #expect(!again, "already handing over")
        #expect(machine.phase == .handingOver(to: "new", targets: [:], deadline: Machine.handOverWithinS))
        var taking = Machine(instance: "new", takingOver: true, timeoutS: 10)
        let whileTaking = taking.request(Self.request(from: "newer"), ours: true, now: 0)
        #expect(!whileTaking, "a detector taking over hands nothing over")
        let handingOff = machine.handOff(states: [:], positions: [:])
        let notHandingOver = taking.handOff(states: [:], positions: [:])
        #expect(handingOff != nil && notHandingOver == nil)
    }
}

/// A stand-in for a station state that cannot be encoded (the detector's own states always
/// can): what `Handover` must survive. A test double, labelled as one.
struct Unencodable: HandedOverState {
    var station: String
    init(station: String) { self.station = station }
    init(from decoder: any Decoder) throws { station = try String(from: decoder) }
    func encode(to encoder: any Encoder) throws {
        throw EncodingError.invalidValue(station, .init(codingPath: [], debugDescription: "not encodable"))
    }
}
