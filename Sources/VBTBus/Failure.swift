#if canImport(Glibc)
import Glibc
#endif

/// Prints a one-line, actionable problem to stderr (the caller then exits non-zero).
public func reportProblem(_ message: String) {
    let line = Array((message + "\n").utf8)
    _ = line.withUnsafeBytes { write(STDERR_FILENO, $0.baseAddress, $0.count) }
}
