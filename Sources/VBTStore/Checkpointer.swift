import Foundation
import GRDB
import Logging
import VBTBus
import VBTQuery

/// Copies the recorder's write-ahead log into the database from a thread and connection of
/// its own (SQLite's passive checkpoint, sqlite.org/wal.html, "Checkpointing"), so the
/// recorder's writes do not. Left to SQLite, the write that takes the log past 1,000 pages
/// does the copying in its commit: at 600 stations that was a fifth of the recorder's loop,
/// time in which it read nothing from the bus. A passive
/// checkpoint waits for no one and blocks no one: the recorder keeps writing meanwhile, and
/// readers keep reading. Should this thread fall behind or stop, the recorder's own
/// connection still checkpoints once the log passes `StoreSettings.walPagesBeforeWriterCopies`.
public final class WALCheckpointer: @unchecked Sendable {
    public let path: String
    private let logger: Logger
    private let stopping = StopFlag()
    private let finished = DispatchSemaphore(value: 0)
    private var thread: Thread?
    /// Opened at the first checkpoint: the recorder may start before the file can be opened.
    private var queue: DatabaseQueue?

    public init(path: String, logger: Logger) {
        self.path = path
        self.logger = logger
    }

    /// One passive checkpoint: the log's frames, and how many of them are now in the database.
    /// From one thread at a time: the one `start` runs, or a caller while none runs.
    @discardableResult
    public func checkpointOnce() throws(StoreError) -> (logFrames: Int, copied: Int) {
        // Not created here: the recorder creates and migrates it (or waits until it can).
        guard queue != nil || FileManager.default.fileExists(atPath: path) else { return (0, 0) }
        do {
            if queue == nil {
                var configuration = Configuration()
                configuration.label = "vbt-checkpoint"
                configuration.busyMode = .timeout(0.2)
                queue = try DatabaseQueue(path: path, configuration: configuration)
            }
            let result = try queue!.writeWithoutTransaction { db in try db.checkpoint(.passive) }
            return (result.walFrameCount, result.checkpointedFrameCount)
        } catch {
            // A damaged or vanished file: opened afresh next time.
            try? queue?.close()
            queue = nil
            throw StoreError.from(error, path: path)
        }
    }

    /// Checkpoints every `intervalS` until `stop()`.
    public func start(intervalS: Double = 0.25) {
        let thread = Thread { [self] in
            var lastProblem: String?
            while stopping.sleep(intervalS) {
                do {
                    try checkpointOnce()
                    lastProblem = nil
                } catch {
                    // Said once per kind of trouble; the recorder's own writes report the file's state.
                    let problem = (error as? StoreError)?.message ?? "\(error)"
                    if problem != lastProblem {
                        logger.warning("checkpoint failed; retrying", metadata: ["db": "\(path)", "error": "\(problem)"])
                        lastProblem = problem
                    }
                }
            }
            try? queue?.close()
            queue = nil
            finished.signal()
        }
        thread.name = "vbt-checkpoint"
        self.thread = thread
        thread.start()
    }

    /// Stops the thread started by `start` and waits for it.
    public func stop() {
        guard thread != nil else { return }
        stopping.set()
        finished.wait()
        thread = nil
    }
}
