import VBTWire

// A measurement's figures are a `RepFigures`, the value the rep message holds: the detector
// publishes them as they are (`DetectorRuntime.publish`), so a figure added to `RepFigures` and
// computed in `measureConcentric` needs no mapping. Encoded flat, beside the phase's times, as
// the measurement was before it held them: checkpoints and hand-overs read either way.

extension RepMeasurement: Codable {
    private enum Times: String, CodingKey { case concentricStartT, concentricEndT, peakSampleT }

    /// Creates a measurement from its times and its figures' values.
    public init(
        concentricStartT: Double, concentricEndT: Double, peakSampleT: Double, meanVelocityMps: Double, peakVelocityMps: Double,
        meanPropulsiveVelocityMps: Double, romMm: Double, concentricS: Double, timeToPeakS: Double, meanPowerW: Double?
    ) {
        self.init(
            concentricStartT: concentricStartT, concentricEndT: concentricEndT, peakSampleT: peakSampleT,
            figures: RepFigures(
                meanVelocityMps: meanVelocityMps, peakVelocityMps: peakVelocityMps, meanPropulsiveVelocityMps: meanPropulsiveVelocityMps,
                romMm: romMm, concentricS: concentricS, timeToPeakS: timeToPeakS, meanPowerW: meanPowerW))
    }

    /// A figure, as if it were the measurement's own property.
    public subscript<T>(dynamicMember path: WritableKeyPath<RepFigures, T>) -> T {
        get { figures[keyPath: path] }
        set { figures[keyPath: path] = newValue }
    }

    public init(from decoder: any Decoder) throws {
        let times = try decoder.container(keyedBy: Times.self)
        self.init(
            concentricStartT: try times.decode(Double.self, forKey: .concentricStartT),
            concentricEndT: try times.decode(Double.self, forKey: .concentricEndT),
            peakSampleT: try times.decode(Double.self, forKey: .peakSampleT), figures: try RepFigures(from: decoder))
    }

    public func encode(to encoder: any Encoder) throws {
        var times = encoder.container(keyedBy: Times.self)
        try times.encode(concentricStartT, forKey: .concentricStartT)
        try times.encode(concentricEndT, forKey: .concentricEndT)
        try times.encode(peakSampleT, forKey: .peakSampleT)
        try figures.encode(to: encoder)
    }
}
