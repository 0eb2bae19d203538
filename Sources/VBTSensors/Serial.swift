import Logging
import VBTBus
import VBTWire

#if canImport(Glibc)
import Glibc
#endif

/// The protocols a serial sensor can speak.
public enum SerialProtocol: String, Sendable, CaseIterable {
    /// WitMotion IMU: 11-byte checksummed frames or 20-byte `55 61` packets.
    case witmotion
    /// Arduino + VL53L0X: `D:<mm>,S:<state>,A:<ax>,<ay>,<az>` lines.
    case arduinoDistance = "arduino-distance"

    /// The `sensor` field of what it produces.
    public var sensor: String { self == .witmotion ? "imu" : "distance" }
}

/// A serial port opened raw (termios), read with timeouts.
public final class SerialPort {
    /// The descriptor.
    public let fd: Int32
    /// The path opened.
    public let path: String

    /// Baud rates termios knows.
    public static let baudRates: [Int: speed_t] = [
        4800: speed_t(B4800), 9600: speed_t(B9600), 19200: speed_t(B19200), 38400: speed_t(B38400),
        57600: speed_t(B57600), 115200: speed_t(B115200), 230400: speed_t(B230400), 460800: speed_t(B460800),
        921600: speed_t(B921600),
    ]

    /// Opens `path` raw at `baud`; the error says what to do.
    public init(path: String, baud: Int) throws(SensorError) {
        guard let speed = Self.baudRates[baud] else {
            throw SensorError("Unsupported baud rate \(baud): use one of \(Self.baudRates.keys.sorted().map(String.init).joined(separator: ", "))")
        }
        let fd = open(path, O_RDWR | O_NOCTTY | O_NONBLOCK | O_CLOEXEC)
        guard fd >= 0 else { throw SensorError.serialOpen(path: path, errno: errno) }
        var settings = termios()
        guard tcgetattr(fd, &settings) == 0 else {
            let code = errno
            close(fd)
            throw SensorError("\(path) is not a serial device (\(String(cString: strerror(code)))): check the path")
        }
        cfmakeraw(&settings)
        cfsetispeed(&settings, speed)
        cfsetospeed(&settings, speed)
        settings.c_cflag |= tcflag_t(CLOCAL | CREAD)
        tcsetattr(fd, TCSANOW, &settings)
        tcflush(fd, TCIFLUSH)
        self.fd = fd
        self.path = path
    }

    deinit { close(fd) }

    /// Reads what is available within `timeoutS`: empty on timeout; throws when the device is gone.
    public func read(timeoutS: Double, max: Int = 4096) throws(SensorError) -> [UInt8] {
        var item = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
        let ready = poll(&item, 1, Int32(timeoutS * 1000))
        if ready < 0 {
            if errno == EINTR { return [] }
            throw SensorError("Reading \(path) failed: \(String(cString: strerror(errno)))")
        }
        if ready == 0 { return [] }
        if item.revents & Int16(POLLIN) == 0, item.revents & Int16(POLLHUP | POLLERR | POLLNVAL) != 0 {
            throw SensorError("Sensor on \(path) disconnected: check the USB cable")
        }
        var buffer = [UInt8](repeating: 0, count: max)
        let count = Glibc.read(fd, &buffer, max)
        if count < 0 {
            if errno == EAGAIN || errno == EINTR { return [] }
            throw SensorError("Sensor on \(path) disconnected (\(String(cString: strerror(errno)))): check the USB cable")
        }
        if count == 0 { throw SensorError("Sensor on \(path) disconnected: check the USB cable") }
        return Array(buffer[0..<count])
    }
}

/// A problem with a sensor, in words that say what to do.
public struct SensorError: Error, Sendable, CustomStringConvertible, Equatable {
    /// The one-line message.
    public let message: String
    /// Creates an error.
    public init(_ message: String) { self.message = message }
    public var description: String { message }

    /// The message for a serial port that cannot be opened.
    public static func serialOpen(path: String, errno code: Int32) -> SensorError {
        switch code {
        case ENOENT:
            SensorError("Serial device \(path) not found: plug the sensor in, or check the path (ls /dev/ttyUSB* /dev/ttyACM*)")
        case EACCES, EPERM:
            SensorError("Permission denied on \(path): add this user to the dialout group (sudo usermod -aG dialout $USER) and log in again")
        case EBUSY:
            SensorError("\(path) is busy: another program has the sensor open; close it and retry")
        default:
            SensorError("Cannot open \(path): \(String(cString: strerror(code)))")
        }
    }
}

/// A sensor on a serial port: opens, decodes, reconnects.
public struct SerialSource: SensorSource {
    public let path: String
    public let proto: SerialProtocol
    public let baud: Int
    public let station: String
    public var reconnect = ReconnectPolicy()
    /// Seconds between `streaming` status messages with the measured rate.
    public var statusIntervalS = 5.0

    public var name: String { "serial:\(path)" }

    /// Creates a serial source.
    public init(path: String, proto: SerialProtocol, baud: Int, station: String) {
        (self.path, self.proto, self.baud, self.station) = (path, proto, baud, station)
    }

    private func status(_ state: StatusMessage.State, rateHz: Double? = nil, reason: String? = nil) -> BridgeEvent {
        .status(station: station, StatusMessage(state: state, sensor: proto.sensor, device: path, rateHz: rateHz, reason: reason))
    }

    public func run(into queue: EventQueue, stop: StopFlag, logger: Logger) {
        var failures = 0
        while !stop.isSet {
            queue.push(status(.connecting))
            do {
                let port = try SerialPort(path: path, baud: baud)
                failures = 0
                queue.push(status(.connected))
                try stream(port, into: queue, stop: stop, logger: logger)
            } catch {
                failures += 1
                queue.push(status(.disconnected, reason: error.message))
                stop.sleep(reconnect.delay(afterFailures: failures))
            }
        }
    }

    private func stream(_ port: SerialPort, into queue: EventQueue, stop: StopFlag, logger: Logger) throws(SensorError) {
        var witmotion = WitMotionDecoder()
        var distance = ArduinoDistanceDecoder()
        var rate = RateEstimator()
        var stamper = MonotonicStamper()
        var nextStatus = monotonicSeconds() + 1
        var reportedMalformed = 0
        while !stop.isSet {
            let chunk = try port.read(timeoutS: 0.1)
            let now = wallClockSeconds()
            if !chunk.isEmpty {
                switch proto {
                case .witmotion:
                    var readings: [SampleMessage.IMUReading] = []
                    for frame in witmotion.feed(chunk) {
                        guard case .imu(let acc, let gyro, let angle) = frame else { continue }
                        let t = stamper.stamp(now)
                        rate.add(t)
                        readings.append(.init(t: t, accG: acc, gyroDps: gyro, angleDeg: angle))
                    }
                    if !readings.isEmpty { queue.push(.readings(station: station, device: path, .imu(readings))) }
                case .arduinoDistance:
                    let readings = distance.feed(chunk).map { reading -> SampleMessage.DistanceReading in
                        let t = stamper.stamp(now)
                        rate.add(t)
                        return .init(t: t, distanceMm: reading.distanceMm, state: reading.state, accG: reading.accG)
                    }
                    if !readings.isEmpty { queue.push(.readings(station: station, device: path, .distance(readings))) }
                }
            }
            let monotonic = monotonicSeconds()
            if monotonic >= nextStatus {
                nextStatus = monotonic + statusIntervalS
                queue.push(status(.streaming, rateHz: rate.rateHz(now: now) ?? 0))
                let counters = proto == .witmotion ? witmotion.counters : distance.counters
                let bad = counters.malformed + counters.badChecksums
                if bad > reportedMalformed {
                    logger.warning(
                        "serial input had errors",
                        metadata: [
                            "device": "\(path)", "bad_frames": "\(bad)", "skipped_bytes": "\(counters.skippedBytes)",
                            "frames": "\(counters.frames)",
                        ])
                    reportedMalformed = bad
                }
            }
        }
    }
}
