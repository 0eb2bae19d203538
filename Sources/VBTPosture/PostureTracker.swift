import Foundation
import Logging
import VBTBus
import VBTQuery
import VBTWire

/// How the posture evaluator behaves.
public struct PostureSettings: Sendable, Codable, Equatable {
    /// A new state must hold this long (reading time) before it is reported: noise does not flap.
    public var hysteresisS = 0.5
    /// Bad posture held this long is "sustained" (the notifier alerts on it).
    public var sustainedBadS = 5.0
    /// Most posture messages per second per station (state changes always go out at once).
    public var maxRateHz = 5.0
    /// Creates the defaults.
    public init() {}
}

/// One station's posture state: calibration, collection, hysteresis.
/// Codable: the evaluator checkpoints it.
public struct PostureTracker: Sendable, Codable {
    public let station: String
    public var settings: PostureSettings
    public var athlete: String?
    public private(set) var calibration: PostureCalibration?
    private var collecting: Collection?
    private var reported: Bool?
    private var candidate: Candidate?
    private var badSince: Double?
    private var lastPublishedT = -Double.infinity

    /// A state seen but not yet held for the hysteresis, and since when.
    struct Candidate: Sendable, Codable {
        var correct: Bool
        var since: Double
    }

    struct Collection: Sendable, Codable {
        var athlete: String
        var seconds: Double
        var startT: Double?
        var acc: [Vector3] = []
        var mag: [Vector3] = []
    }

    /// Creates a tracker.
    public init(station: String, settings: PostureSettings = PostureSettings()) {
        self.station = station
        self.settings = settings
    }

    /// What feeding produced.
    public enum Output: Sendable, Equatable {
        case posture(PostureReport)
        case calibrated(PostureCalibration)
    }

    /// Whether a calibration is collecting readings.
    var isCalibrating: Bool { collecting != nil }

    /// Starts collecting `seconds` of readings for `athlete`'s calibration.
    public mutating func startCalibration(athlete: String, seconds: Double) {
        collecting = Collection(athlete: athlete, seconds: seconds)
    }

    /// Uses `calibration` from now on (an assignment, or one arriving mid-stream): the state starts over.
    public mutating func apply(_ calibration: PostureCalibration) {
        self.calibration = calibration
        athlete = calibration.athlete
        reported = nil
        candidate = nil
        badSince = nil
    }

    /// Nobody at the station any more: nothing is judged until someone is assigned or calibrated.
    public mutating func unassign() {
        athlete = nil
        calibration = nil
        collecting = nil
        reported = nil
        candidate = nil
        badSince = nil
    }

    /// A new athlete without a stored calibration: nothing is judged until they calibrate.
    public mutating func clearCalibration(athlete: String) {
        self.athlete = athlete
        calibration = nil
        reported = nil
        candidate = nil
        badSince = nil
    }

    /// Feeds one reading.
    public mutating func feed(t: Double, acc: Vector3, mag: Vector3) -> [Output] {
        var out: [Output] = []
        if var collection = collecting {
            let start = collection.startT ?? t
            collection.startT = start
            collection.acc.append(acc)
            collection.mag.append(mag)
            if t - start >= collection.seconds {
                let made = PostureCalibration.fit(athlete: collection.athlete, acc: collection.acc, mag: collection.mag, at: t)
                collecting = nil
                // Only an assignment changes who is at the station: another athlete's calibration
                // is kept for them (and published), the station's athlete keeps theirs.
                if athlete == nil || athlete == made.athlete { apply(made) }
                out.append(.calibrated(made))
            } else {
                collecting = collection
            }
            return out
        }
        guard let calibration else { return out }
        let result = calibration.evaluate(acc: acc, mag: mag)
        // Hysteresis: a new state counts once it has held for hysteresisS.
        var changed = false
        if reported == nil {
            reported = result.correct
            changed = true
        } else if result.correct != reported {
            if let held = candidate, held.correct == result.correct {
                if t - held.since >= settings.hysteresisS {
                    reported = result.correct
                    candidate = nil
                    changed = true
                }
            } else {
                candidate = Candidate(correct: result.correct, since: t)
            }
        } else {
            candidate = nil
        }
        let correct = reported ?? result.correct
        if correct { badSince = nil } else if badSince == nil { badSince = candidateStart(t) }
        guard changed || t - lastPublishedT >= 1 / settings.maxRateHz else { return out }
        lastPublishedT = t
        let badFor = badSince.map { t - $0 } ?? 0
        out.append(
            .posture(
                PostureReport(
                    station: station, athlete: athlete,
                    posture: PostureMessage(
                        correct: correct, changed: changed, accDensity: result.accDensity, magDensity: result.magDensity,
                        accThreshold: calibration.acc.threshold, magThreshold: calibration.mag.threshold,
                        badForS: badFor, sustainedBad: badFor >= settings.sustainedBadS, t: t))))
        return out
    }

    /// When the current bad stretch began: the candidate's start if it just flipped.
    private func candidateStart(_ t: Double) -> Double { t - settings.hysteresisS }

}

/// One evaluated moment of a station's posture: the `posture` message it publishes, and whose it
/// is (the station and athlete travel in the message's envelope). The message's fields read as
/// the report's own (`report.correct`).
@dynamicMemberLookup
public struct PostureReport: Sendable, Equatable {
    public var station: String
    public var athlete: String?
    /// What it says (proto/posture.schema.json).
    public var posture: PostureMessage

    /// The message's field at `keyPath`.
    public subscript<T>(dynamicMember keyPath: KeyPath<PostureMessage, T>) -> T { posture[keyPath: keyPath] }
}

extension CalibrationMessage {
    /// The message of a calibration: both fits, and the whole model as JSON text
    /// with sorted keys (the same calibration, the same text).
    public init(_ calibration: PostureCalibration) {
        func fit(_ sensor: SensorCalibration) -> Fit {
            Fit(
                mean: sensor.mean, covariance: sensor.covariance, determinant: sensor.determinant, inverse: sensor.inverse,
                eigenvalues: sensor.eigenvalues, sigma: sensor.sigma, threshold: sensor.threshold, fromData: sensor.fromData,
                reason: sensor.reason, samples: sensor.samples)
        }
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys]
        let json = (try? encoder.encode(calibration)).map { String(decoding: $0, as: UTF8.self) } ?? "{}"
        self.init(acc: fit(calibration.acc), mag: fit(calibration.mag), json: json)
    }

    /// The model it carries, if its JSON text is one this build reads.
    public var calibration: PostureCalibration? {
        try? JSONDecoder().decode(PostureCalibration.self, from: Data(json.utf8))
    }
}
