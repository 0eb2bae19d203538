import Testing
import VBTBus

/// `HeardStreams`: what a subscriber that takes messages as they come missed of some streams.
@Suite("Heard streams")
struct HeardStreamsTests {
    static let rep = "rep-detector-1a2b/rep.rack-1"
    static let other = "rep-detector-1a2b/rep.rack-2"

    func streams() -> HeardStreams { HeardStreams { $0.contains("/rep.") } }

    @Test("a jump is a hole; what fills it is taken once; a second copy, or a stream not kept, is not")
    func jumpsAndFills() {
        var heard = streams()
        let taken = [4, 5, 9].map { heard.heard(src: Self.rep, seq: $0) }
        #expect(taken == [true, true, true])
        #expect(heard.holes[Self.rep] == [6...8] && heard.missing == 3, "before any offer a stream is taken from its first message")
        let filled = heard.heard(src: Self.rep, seq: 7)
        #expect(filled && heard.holes[Self.rep] == [6...6, 8...8])
        let again = [7, 5].map { heard.heard(src: Self.rep, seq: $0) }
        #expect(again == [false, false])
        let rest = [6, 8].map { heard.heard(src: Self.rep, seq: $0) }
        #expect(rest == [true, true] && heard.holes[Self.rep] == nil && heard.missing == 0)
        let sample = heard.heard(src: "sensor-bridge-9/sample.rack-1", seq: 3)
        #expect(!sample && heard.last["sensor-bridge-9/sample.rack-1"] == nil)
    }

    @Test("a producer's first offer says where its streams stood; a later one names tails, and streams begun since from seq 1")
    func offers() {
        var heard = streams()
        heard.offered(by: "rep-detector", instance: "rep-detector-1a2b", lastSeq: [Self.rep: 40, "rep-detector-1a2b/set.rack-1": 7])
        #expect(heard.holes.isEmpty && heard.last[Self.rep] == 40 && heard.last["rep-detector-1a2b/set.rack-1"] == nil)
        // A stream begun since the first offer, heard first at seq 3: 1 and 2 were missed.
        let begun = heard.heard(src: Self.other, seq: 3)
        #expect(begun && heard.holes[Self.other] == [1...2])
        // The next offer: the first stream went on to 43 unheard (a tail), and a third began unheard.
        let third = "rep-detector-1a2b/rep.rack-3"
        heard.offered(by: "rep-detector", instance: "rep-detector-1a2b", lastSeq: [Self.rep: 43, Self.other: 3, third: 2])
        #expect(heard.holes[Self.rep] == [41...43] && heard.holes[Self.other] == [1...2] && heard.holes[third] == [1...2])
        #expect(heard.producers[third] == "rep-detector" && heard.missing == 7)
        // A stream of an instance whose offer was never seen is taken from its first message.
        let unknown = heard.heard(src: "rep-detector-ffff/rep.rack-1", seq: 12)
        #expect(unknown && heard.holes["rep-detector-ffff/rep.rack-1"] == nil)
    }

    @Test("a seq that runs absurdly far ahead (forged or corrupt) opens no hole and silences nothing")
    func farAhead() {
        var heard = streams()
        _ = heard.heard(src: Self.rep, seq: 10)
        let forged = heard.heard(src: Self.rep, seq: 9_007_199_254_740_991)
        let next = heard.heard(src: Self.rep, seq: 12)
        #expect(forged && next && heard.ahead == 1 && heard.holes[Self.rep] == [11...11] && heard.last[Self.rep] == 12)
        heard.offered(by: "rep-detector", instance: "rep-detector-1a2b", lastSeq: [Self.rep: 9_000_000_000])
        #expect(heard.ahead == 2 && heard.missing == 1)
        // A stream begun since the first offer, first heard far ahead: nothing is taken from it.
        let other = heard.heard(src: Self.other, seq: 5_000_000)
        #expect(other && heard.ahead == 3 && heard.last[Self.other] == nil && heard.holes[Self.other] == nil)
    }

    @Test("what a journal no longer holds is given up and counted")
    func givingUp() {
        var heard = streams()
        _ = heard.heard(src: Self.rep, seq: 1)
        _ = heard.heard(src: Self.rep, seq: 5)
        _ = heard.heard(src: Self.rep, seq: 10)
        #expect(heard.holes[Self.rep] == [2...4, 6...9])
        let first = heard.giveUp(src: Self.rep, below: 7)
        #expect(first == 4 && heard.holes[Self.rep] == [7...9])
        let second = heard.giveUp(src: Self.rep, below: 100), none = heard.giveUp(src: Self.other, below: 100)
        #expect(second == 3 && heard.holes[Self.rep] == nil && none == 0)
    }

    @Test("a hole list splits in place and stays in order")
    func holeLists() {
        var list: [ClosedRange<UInt64>] = [2...4, 8...8, 10...20]
        #expect(list.holeIndex(holding: 8) == 1 && list.holeIndex(holding: 5) == nil && list.holeIndex(holding: 21) == nil)
        let middle = list.fill(15)
        #expect(middle && list == [2...4, 8...8, 10...14, 16...20])
        let whole = list.fill(8)
        #expect(whole && list == [2...4, 10...14, 16...20])
        let outside = [list.fill(8), list.fill(1)]
        #expect(outside == [false, false])
        let ends = [list.fill(2), list.fill(4)]
        #expect(ends == [true, true] && list == [3...3, 10...14, 16...20] && list.seqCount == 11)
    }
}
