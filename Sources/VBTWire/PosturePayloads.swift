// The posture evaluator's messages (proto/posture, calibration). Each mirrors
// its schema; the evaluator's own model types (VBTPosture) convert to and
// from them, so no other program needs that module to read them.

/// `posture`: a station's evaluated posture.
public struct PostureMessage: BusPayload, Equatable {
    public static let type = "posture"
    public var correct: Bool
    /// The state just changed (after the hysteresis).
    public var changed: Bool
    public var accDensity: Double
    public var magDensity: Double
    public var accThreshold: Double
    public var magThreshold: Double
    /// How long the posture has been bad, seconds (0 when correct).
    public var badForS: Double
    /// Bad for at least the configured limit.
    public var sustainedBad: Bool
    /// Reading time.
    public var t: Double

    /// Creates a posture message.
    public init(
        correct: Bool, changed: Bool, accDensity: Double, magDensity: Double, accThreshold: Double, magThreshold: Double,
        badForS: Double, sustainedBad: Bool, t: Double
    ) {
        (self.correct, self.changed, self.accDensity, self.magDensity) = (correct, changed, accDensity, magDensity)
        (self.accThreshold, self.magThreshold, self.badForS, self.sustainedBad, self.t) = (accThreshold, magThreshold, badForS, sustainedBad, t)
    }

    public init(fields: JSONObject) throws(PayloadError) {
        correct = try fields.flag("correct")
        changed = try fields.flag("changed")
        accDensity = try fields.number("acc_density")
        magDensity = try fields.number("mag_density")
        accThreshold = try fields.number("acc_threshold")
        magThreshold = try fields.number("mag_threshold")
        badForS = try fields.number("bad_for_s")
        sustainedBad = try fields.flag("sustained_bad")
        t = try fields.number("t")
    }

    public func write(to writer: inout JSONWriter) {
        writer.key("correct"); writer.bool(correct)
        writer.key("changed"); writer.bool(changed)
        writer.field("acc_density", accDensity)
        writer.field("mag_density", magDensity)
        writer.field("acc_threshold", accThreshold)
        writer.field("mag_threshold", magThreshold)
        writer.key("bad_for_s"); writer.fixed(badForS, decimals: 3)
        writer.key("sustained_bad"); writer.bool(sustainedBad)
        writer.key("t"); writer.fixed(t, decimals: 6)
    }
}

/// `calibration`: an athlete's posture calibration: a Gaussian fit per sensor
/// and the whole model as JSON text for consumers that store and reload it.
public struct CalibrationMessage: BusPayload, Equatable {
    public static let type = "calibration"

    /// One sensor's fit (sensor units).
    public struct Fit: Sendable, Equatable {
        public var mean: [Double]
        public var covariance: [[Double]]
        public var determinant: Double
        public var inverse: [[Double]]
        public var eigenvalues: [Double]
        public var sigma: [Double]
        /// Densities below this are bad posture.
        public var threshold: Double
        /// Fitted from the readings (false: a fallback, see `reason`).
        public var fromData: Bool
        public var reason: String?
        public var samples: Int

        /// Creates a fit.
        public init(
            mean: [Double], covariance: [[Double]], determinant: Double, inverse: [[Double]], eigenvalues: [Double],
            sigma: [Double], threshold: Double, fromData: Bool, reason: String?, samples: Int
        ) {
            (self.mean, self.covariance, self.determinant, self.inverse, self.eigenvalues) = (mean, covariance, determinant, inverse, eigenvalues)
            (self.sigma, self.threshold, self.fromData, self.reason, self.samples) = (sigma, threshold, fromData, reason, samples)
        }

        init(_ fields: JSONObject) throws(PayloadError) {
            mean = try fields.numbers("mean")
            covariance = try fields.matrix("covariance")
            determinant = try fields.number("determinant")
            inverse = try fields.matrix("inverse")
            eigenvalues = try fields.numbers("eigenvalues")
            sigma = try fields.numbers("sigma")
            threshold = try fields.number("threshold")
            fromData = try fields.flag("from_data")
            reason = try fields.optionalString("reason")
            samples = try fields.integer("samples")
        }

        func write(to writer: inout JSONWriter) {
            writer.beginObject()
            writer.key("mean"); writer.numbers(mean)
            writer.key("covariance"); writer.beginArray()
            for row in covariance { writer.numbers(row) }
            writer.endArray()
            writer.field("determinant", determinant)
            writer.key("inverse"); writer.beginArray()
            for row in inverse { writer.numbers(row) }
            writer.endArray()
            writer.key("eigenvalues"); writer.numbers(eigenvalues)
            writer.key("sigma"); writer.numbers(sigma)
            writer.field("threshold", threshold)
            writer.key("from_data"); writer.bool(fromData)
            writer.optionalField("reason", reason)
            writer.field("samples", samples)
            writer.endObject()
        }
    }

    public var acc: Fit
    public var mag: Fit
    /// The whole calibration as the posture evaluator's model (JSON text).
    public var json: String

    /// Creates a calibration message.
    public init(acc: Fit, mag: Fit, json: String) { (self.acc, self.mag, self.json) = (acc, mag, json) }

    public init(fields: JSONObject) throws(PayloadError) {
        guard let acc = try fields.optionalObject("acc"), let mag = try fields.optionalObject("mag") else {
            throw PayloadError("acc and mag must be the two sensors' fits")
        }
        self.acc = try Fit(acc)
        self.mag = try Fit(mag)
        json = try fields.string("json")
    }

    public func write(to writer: inout JSONWriter) {
        writer.key("acc"); acc.write(to: &writer)
        writer.key("mag"); mag.write(to: &writer)
        writer.field("json", json)
    }
}

extension JSONObject {
    /// A required boolean.
    func flag(_ key: String) throws(PayloadError) -> Bool {
        guard let value = try optionalFlag(key) else { throw PayloadError("\(key) must be a boolean") }
        return value
    }

    /// An optional boolean (absent or null gives nil).
    func optionalFlag(_ key: String) throws(PayloadError) -> Bool? {
        switch self[key] {
        case nil, .null?: return nil
        case .bool(let value)?: return value
        default: throw PayloadError("\(key) must be a boolean")
        }
    }

    /// A required array of arrays of numbers.
    func matrix(_ key: String) throws(PayloadError) -> [[Double]] {
        guard case .array(let rows)? = self[key] else { throw PayloadError("\(key) must be an array of arrays of numbers") }
        var matrix: [[Double]] = []
        for row in rows {
            guard case .array(let items) = row else { throw PayloadError("\(key) must be an array of arrays of numbers") }
            var values: [Double] = []
            for item in items {
                guard case .number(let value) = item else { throw PayloadError("\(key) must be an array of arrays of numbers") }
                values.append(value)
            }
            matrix.append(values)
        }
        return matrix
    }
}
