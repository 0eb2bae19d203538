import Testing
import VBTWire

@testable import VBTSensors

/// A WitMotion's BLE notifications arriving in bursts, as device bytes: the bridge's stamps.
@Suite("Burst stamping")
struct BurstStampingTests {
    /// A reading whose first raw value is its index, so each can be followed.
    static func packet(_ index: Int) -> [UInt8] {
        Bytes.packet61([Int16(truncatingIfNeeded: index), 0, 2048, 0, 0, 0, 0, 0, 0])
    }

    static func index(_ reading: SampleMessage.IMUReading) -> Int {
        Int((reading.accG.x / WitMotionDecoder.accScale).rounded())
    }

    /// A 99 Hz sensor in groups of 4 sent at 31 ms connection events (every 7th event missed),
    /// fed through the stream: the readings, and when each was sampled and arrived.
    static func run(
        seconds: Double, start: Double = 1_800_000_000.25, askedHz: Double = 100
    ) -> (
        readings: [SampleMessage.IMUReading], sampled: [Double], arrived: [Double], bursts: [Int]
    ) {
        var stream = WitMotionStream(rateHz: askedHz)
        let period = 1 / 99.0, interval = 0.031
        var readings: [SampleMessage.IMUReading] = []
        var sampled: [Double] = [], arrived: [Double] = [], bursts: [Int] = []
        var next = 0, event = 0
        while Double(next) * period < seconds {
            event += 1
            if event % 7 == 0 { continue }  // missed: its groups go with the next
            let at = Double(event) * interval
            var notifications: [[UInt8]] = []
            // Every complete group of 4 sampled by this event.
            while Double(next + 3) * period <= at {
                notifications += (next..<(next + 4)).map(packet)
                sampled += (next..<(next + 4)).map { start + Double($0) * period }
                next += 4
            }
            guard !notifications.isEmpty else { continue }
            let arrival = start + at + 0.001
            let (got, other) = stream.feed(notifications, arrivalS: arrival)
            #expect(other.isEmpty)
            readings += got
            arrived += got.map { _ in arrival }
            bursts.append(got.count)
        }
        return (readings, sampled, arrived, bursts)
    }

    @Test("bursts of 4, 8 and 12 readings are spread by the sensor's period, never 1 us apart, never after arrival")
    func spread() {
        let (readings, sampled, arrived, bursts) = Self.run(seconds: 20)
        #expect(readings.map(Self.index) == Array(0..<readings.count), "every reading, in order")
        #expect(Set(bursts).isSuperset(of: [4, 8]))
        #expect(zip(readings, readings.dropFirst()).allSatisfy { $0.t < $1.t })
        #expect(zip(readings, arrived).allSatisfy { $0.t <= $1 })
        // Inside a burst the readings are a period apart (asked 100 Hz, then measured 99 Hz).
        var offset = 0
        for size in bursts {
            let times = readings[offset..<(offset + size)].map(\.t)
            #expect(zip(times, times.dropFirst()).allSatisfy { ($1 - $0) > 0.0099 && ($1 - $0) < 0.0102 }, "\(times)")
            offset += size
        }
        // They follow the sensor's cadence: each within a few ms of when it was sampled (a burst
        // stamped at arrival is up to 70 ms late here), and within the 1 ms latency and a little
        // once the rate is measured.
        let errors = zip(readings, sampled).dropFirst(100).map { $0.t - $1 }
        #expect(errors.allSatisfy { $0 > -0.007 && $0 < 0.006 }, "\(errors.min()!)...\(errors.max()!)")
        let late = zip(readings, sampled).suffix(1000).map { $0.t - $1 }
        #expect(late.allSatisfy { $0 > -0.001 && $0 < 0.003 }, "\(late.min()!)...\(late.max()!)")
        let naive = zip(arrived, sampled).map { $0 - $1 }
        #expect(naive.max()! > 0.05)
    }

    @Test("the first burst is spread back from its arrival; a gap starts anew at arrival")
    func firstAndGap() {
        var stream = WitMotionStream(rateHz: 100)
        let t0 = 1_800_000_000.5
        let first = stream.feed((0..<4).map(Self.packet), arrivalS: t0).readings.map(\.t)
        #expect(first.map { ($0 * 1e6).rounded() } == [t0 - 0.03, t0 - 0.02, t0 - 0.01, t0].map { ($0 * 1e6).rounded() })
        let second = stream.feed((4..<8).map(Self.packet), arrivalS: t0 + 0.041).readings.map(\.t)
        #expect(second.first! > first.last! && second.last! <= t0 + 0.041)
        // The sensor paused for a second: the readings after it are placed at their arrival.
        let after = stream.feed((8..<12).map(Self.packet), arrivalS: t0 + 1.5).readings.map(\.t)
        #expect(abs(after.last! - (t0 + 1.5)) < 1e-6)
        #expect(abs(after.first! - (t0 + 1.47)) < 1e-6)
    }

    @Test("a burst early against the last is squeezed in after it, still in order and not after arrival")
    func squeezed() {
        var stream = WitMotionStream(rateHz: 100)
        let t0 = 1_800_000_000.0
        let first = stream.feed((0..<4).map(Self.packet), arrivalS: t0).readings.map(\.t)
        let next = stream.feed((4..<12).map(Self.packet), arrivalS: t0 + 0.004).readings.map(\.t)
        #expect(next.count == 8)
        #expect(next.first! > first.last!)
        #expect(zip(next, next.dropFirst()).allSatisfy { $0 < $1 })
        #expect(next.last! <= t0 + 0.004)
    }

    @Test("register replies in a burst pass through; a reading-less burst stamps nothing")
    func registers() {
        var stream = WitMotionStream(rateHz: 100)
        let (readings, other) = stream.feed([Bytes.packet71(register: 0x03, [0x09, 0, 0, 0, 0, 0, 0, 0])], arrivalS: 1_800_000_000)
        #expect(readings.isEmpty)
        #expect(other == [.registers(start: 0x03, values: [9, 0, 0, 0, 0, 0, 0, 0])])
    }
}
