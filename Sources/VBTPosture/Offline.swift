import Foundation
import VBTBus
import VBTWire

/// `posture-evaluator --compute FILE`: a calibration fitted offline, printed as
/// JSON with the densities of given points (how the maths is checked against
/// an independent implementation).
public enum OfflineCalibration {
    struct Input: Decodable {
        var acc: [[Double]]
        var mag: [[Double]]
        var accPoints: [[Double]]?
        var magPoints: [[Double]]?
    }

    struct Output: Encodable {
        var acc: SensorCalibration
        var mag: SensorCalibration
        var accDensities: [Double]
        var magDensities: [Double]
    }

    /// Reads `path`, fits, returns the JSON text.
    public static func run(path: String) throws -> String {
        guard let data = FileManager.default.contents(atPath: path) else {
            throw PostureError("cannot read \(path): check the path")
        }
        let input: Input
        do { input = try JSONDecoder().decode(Input.self, from: data) } catch {
            throw PostureError("\(path) is not {\"acc\": [[x,y,z],...], \"mag\": [[x,y,z],...], \"accPoints\": [...], \"magPoints\": [...]}: \(error)")
        }
        func vectors(_ rows: [[Double]]) throws -> [Vector3] {
            try rows.map { row in
                guard row.count == 3 else { throw PostureError("every reading needs three numbers") }
                return Vector3(row[0], row[1], row[2])
            }
        }
        let acc = SensorCalibration.fit(try vectors(input.acc)), mag = SensorCalibration.fit(try vectors(input.mag))

        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys]
        encoder.nonConformingFloatEncodingStrategy = .convertToString(positiveInfinity: "inf", negativeInfinity: "-inf", nan: "nan")
        let output = Output(acc: acc, mag: mag, accDensities: (input.accPoints ?? []).map(acc.density), magDensities: (input.magPoints ?? []).map(mag.density))
        return String(decoding: try encoder.encode(output), as: UTF8.self)
    }
}

/// A posture problem, saying what to do.
public struct PostureError: Error, CustomStringConvertible {
    public let message: String
    public init(_ message: String) { self.message = message }
    public var description: String { message }
}
