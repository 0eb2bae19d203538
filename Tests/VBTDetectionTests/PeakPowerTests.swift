import Testing
import VBTDetection
import VBTWire

/// A rep's peak power (`peak_power_w`): the highest m (a + g) v over its concentric phase.
@Suite("Peak power")
struct PeakPowerTests {
    /// A bar at rest, pushed up at 2 m/s^2 for 0.4 s, slowed at 2 m/s^2 to rest, at 100 Hz. Each
    /// reading's acceleration is that of the interval ending at it (as the kinematics give it).
    static func trace() -> [KinematicSample] {
        var samples: [KinematicSample] = []
        var (position, velocity) = (0.0, 0.0)
        for i in 0...200 {
            let t = Double(i) / 100
            let acceleration = t > 0.5 && t <= 0.9 + 1e-9 ? 2.0 : t > 0.9 + 1e-9 && t <= 1.3 + 1e-9 ? -2.0 : 0
            if i > 0 {
                position += velocity * 0.01 + acceleration * 0.01 * 0.01 / 2
                velocity = max(0, velocity + acceleration * 0.01)
            }
            samples.append(KinematicSample(t: t, positionM: position, velocityMps: velocity, accelerationMps2: acceleration))
        }
        return samples
    }

    @Test("with a load: the highest m (a + g) v of the readings, above the mean power; without one: absent")
    func peak() throws {
        let trace = Self.trace()
        let loaded = try #require(measureConcentric(trace, valleyT: 0.5, peakT: 1.3, loadKg: 100))
        let expected = trace.filter { $0.t > loaded.concentricStartT && $0.t < loaded.concentricEndT }
            .map { 100 * ($0.accelerationMps2 + standardGravity) * $0.velocityMps }.max()
        let peak = try #require(loaded.peakPowerW)
        #expect(abs(peak - 100 * (2 + standardGravity) * 0.8) < 1, "\(peak) W")
        #expect(abs(peak - (expected ?? 0)) < 1e-6)
        #expect(peak > (loaded.meanPowerW ?? .infinity))
        let unloaded = try #require(measureConcentric(trace, valleyT: 0.5, peakT: 1.3, loadKg: nil))
        #expect(unloaded.peakPowerW == nil && unloaded.meanPowerW == nil)
    }

    @Test("the rep message carries it as measured, and reads it back")
    func published() throws {
        let measured = try #require(measureConcentric(Self.trace(), valleyT: 0.5, peakT: 1.3, loadKg: 60))
        let rep = RepMessage(
            setId: "s", repId: "r", index: 1, figures: measured.figures, velocityLossPct: 0, tEnd: 1.3, detector: "d",
            concentricStartT: measured.concentricStartT, concentricEndT: measured.concentricEndT, loadKg: 60)
        var writer = JSONWriter()
        writer.beginObject()
        rep.write(to: &writer)
        writer.endObject()
        guard case .object(let object) = try JSONParser.parse(writer.bytes) else { throw PayloadError("not an object") }
        #expect(object["peak_power_w"] == .number(try #require(measured.peakPowerW)))
        #expect(try RepMessage(fields: object).peakPowerW == measured.peakPowerW)
    }
}
