import Foundation
import VBTBus
import VBTDetection
import VBTWire

/// What the hand-over needs of a station's state: the station it is of, and its JSON.
protocol HandedOverState: Codable {
    var station: String { get }
}

extension StationDetector: HandedOverState {}

/// A live hand-over between two rep-detectors (`--takeover`) as a value: messages and time in,
/// what to do out. It holds no socket, clock or file; `DetectorRuntime` feeds it and carries
/// out its actions, so every transition is a plain call (HandoverTests).
///
/// The new side buffers every input message of its stations (`take`); once the bus is heard and
/// some input is buffered (or `askEmptyAfterS` has passed without any), it asks for the takeover
/// with the first seq it holds of each stream (`.requestTakeover`, then `requestSent`). It keeps
/// each station's state as it comes (`handoff`) and on the done completes with them, the old
/// side's positions and its buffer (`.complete`); nobody answering within `timeoutS` of the
/// request, it starts fresh with its buffer (`.startFresh`).
///
/// The old side, active, takes a request for its stations from another instance (`request`) and
/// goes on processing until every stream has passed the new side's first point, or until
/// `handOverWithinS` has passed (`.handOff`). Given its states and positions (`handOff(states:
/// positions:)`), it either has every message encoded (`.send`: then it is finished) or, a
/// state not fitting on the wire, gives up and stays active (`.abort`).
struct Handover<State: HandedOverState> {
    /// Where the hand-over stands.
    enum Phase: Equatable {
        /// Detecting: no hand-over under way.
        case active
        /// The new side: buffering; `requested` once the request went out, given up at `deadline`.
        case takingOver(requested: Bool, deadline: Double)
        /// The old side: processing on until every stream in `targets` (first seq the new side
        /// holds, by stream) has been passed, or until `deadline`.
        case handingOver(to: String, targets: [String: Int], deadline: Double)
        /// Handed over: the process exits.
        case finished
    }

    /// What the runtime is to do.
    enum Action {
        /// Publish a takeover request with each buffered stream's first seq; say `requestSent` once it went.
        case requestTakeover(firstSeq: [String: Int])
        /// Hand over to `to` (`late`: not every stream reached its point in time): apply what
        /// waits, then give the states and positions to `handOff(states:positions:)`.
        case handOff(to: String, late: Bool)
        /// Publish these in order (each station's state, then the done); the process is then done.
        case send([(message: HandoffMessage, station: String)], to: String)
        /// A state cannot go on the wire: the hand-over is off, and detection goes on.
        case abort(to: String, error: any Error)
        /// Restore `states`, go on from the old side's `positions`, then process `buffer`.
        case complete(states: [String: State], positions: [String: Int], from: String, buffer: [BusMessage])
        /// Nobody answered in time: process `buffer` from scratch.
        case startFresh(buffer: [BusMessage])
    }

    /// The old side hands over at the latest this long after the request, s.
    static var handOverWithinS: Double { 5 }
    /// A new side with nothing buffered asks this long after it first could not, s.
    static var askEmptyAfterS: Double { 3 }

    private(set) var phase: Phase
    /// This process's instance name: its own request is not for it, and the handoffs are addressed to it.
    let instance: String
    /// How long the new side waits for the handoff after its request, s.
    let timeoutS: Double
    /// The new side's input, in arrival order, until it completes.
    private(set) var buffer: [BusMessage] = []
    /// The stations' states handed over so far, by station.
    private(set) var states: [String: State] = [:]
    /// When the new side first had nothing to ask about.
    private var quietSince: Double?
    /// Detector state holds infinities ("no rep yet"); JSON has no such numbers.
    private let encoder = JSONEncoder()
    private let decoder = JSONDecoder()

    /// A hand-over for `instance`, on the new side (`takingOver`) or none (active).
    init(instance: String, takingOver: Bool, timeoutS: Double) {
        (self.instance, self.timeoutS) = (instance, timeoutS)
        phase = takingOver ? .takingOver(requested: false, deadline: .infinity) : .active
        encoder.nonConformingFloatEncodingStrategy = .convertToString(positiveInfinity: "inf", negativeInfinity: "-inf", nan: "nan")
        encoder.outputFormatting = [.sortedKeys]
        decoder.nonConformingFloatDecodingStrategy = .convertFromString(positiveInfinity: "inf", negativeInfinity: "-inf", nan: "nan")
    }

    /// Whether input goes on to be processed: false while taking over (it is buffered) and once finished.
    var isProcessing: Bool {
        switch phase {
        case .active, .handingOver: true
        case .takingOver, .finished: false
        }
    }

    /// An input message of this detector's stations: true when it is to be processed now, false
    /// when it is buffered (taking over) or dropped (finished).
    mutating func take(_ message: BusMessage) -> Bool {
        switch phase {
        case .active, .handingOver: return true
        case .takingOver:
            buffer.append(message)
            return false
        case .finished: return false
        }
    }

    /// A takeover request; `ours`: it asks for this detector's stations (the runtime decides).
    /// True when this detector now hands over: it was active and the request is another's.
    mutating func request(_ request: TakeoverMessage, ours: Bool, now: Double) -> Bool {
        guard ours, request.instance != instance, case .active = phase else { return false }
        phase = .handingOver(to: request.instance, targets: request.firstSeq, deadline: now + Self.handOverWithinS)
        return true
    }

    /// The takeover request went out at `now`: the wait for the handoff starts.
    mutating func requestSent(now: Double) {
        guard case .takingOver(false, _) = phase else { return }
        phase = .takingOver(requested: true, deadline: now + timeoutS)
    }

    /// A handoff message: one addressed to this instance while taking over has its state kept
    /// (a state that cannot be read is left out); the done completes the takeover.
    mutating func handoff(_ handoff: HandoffMessage) -> Action? {
        guard handoff.to == instance, case .takingOver = phase else { return nil }
        if let state = handoff.state, let decoded = try? decoder.decode(State.self, from: Data(state.utf8)) {
            states[decoded.station] = decoded
        }
        guard handoff.done else { return nil }
        phase = .active
        defer { (buffer, states) = ([], [:]) }
        return .complete(states: states, positions: handoff.positions, from: handoff.from, buffer: buffer)
    }

    /// Time passes (every step, and on the old side after every message processed): `busHeard`,
    /// a bus heartbeat has come; `position`, the last seq processed of a stream.
    mutating func tick(now: Double, busHeard: Bool, position: (String) -> Int) -> Action? {
        switch phase {
        case .active, .finished:
            return nil
        case .takingOver(requested: false, _):
            guard busHeard, !buffer.isEmpty || now > Self.askEmptyAfterS + (quietSince ?? now) else {
                if quietSince == nil { quietSince = now }
                return nil
            }
            var first: [String: Int] = [:]
            for message in buffer where first[message.envelope.src] == nil { first[message.envelope.src] = Int(message.envelope.seq) }
            return .requestTakeover(firstSeq: first)
        case .takingOver(requested: true, let deadline):
            guard now >= deadline else { return nil }
            phase = .active
            defer { (buffer, states) = ([], [:]) }
            return .startFresh(buffer: buffer)
        case .handingOver(let to, let targets, let deadline):
            let reached = targets.allSatisfy { src, first in position(src) >= first - 1 }
            guard reached || now >= deadline else { return nil }
            return .handOff(to: to, late: !reached)
        }
    }

    /// The old side's every station state and the last seq processed of each stream, once
    /// `.handOff` was acted on: every message is encoded before any is sent, so a state that
    /// cannot go on the wire aborts the hand-over whole (the new side then starts fresh after
    /// its timeout).
    mutating func handOff(states: [String: State], positions: [String: Int]) -> Action? {
        guard case .handingOver(let to, _, _) = phase else { return nil }
        var messages: [(message: HandoffMessage, station: String)] = []
        do {
            for (station, state) in states.sorted(by: { $0.key < $1.key }) {
                let json = String(decoding: try encoder.encode(state), as: UTF8.self)
                messages.append((HandoffMessage(from: instance, to: to, state: json, done: false, positions: [:]), station))
            }
            messages.append((HandoffMessage(from: instance, to: to, state: nil, done: true, positions: positions), "detector"))
            var stamper = EnvelopeStamper(program: "check")
            for (message, station) in messages { _ = try stamper.encode(message, station: station, ts: 1) }
        } catch {
            phase = .active
            return .abort(to: to, error: error)
        }
        phase = .finished
        return .send(messages, to: to)
    }
}
