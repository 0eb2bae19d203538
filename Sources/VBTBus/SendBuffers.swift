import CZeroMQ
import Synchronization

/// Buffers a published frame is copied into and handed to libzmq as it is
/// (`zmq_msg_init_data`), which libzmq's I/O thread gives back, once the frame
/// is written, with one atomic store.
///
/// Why: `zmq_send` copies each frame into memory allocated on the sending thread
/// and freed on the I/O thread, and glibc frees it under the sending thread's arena
/// lock, so at tens of thousands of frames a second the two threads wait on each
/// other. Here libzmq allocates only a frame's small descriptor, which glibc frees
/// without a lock. No library offers such a pool for libzmq; the measurements are
/// in docs/decisions/0032-send-buffers.md.
///
/// A frame that does not fit a buffer, or finds the next buffer still held
/// (libzmq keeps frames it cannot send yet), is sent the usual way.
final class SendBuffers: @unchecked Sendable {
    /// One pool for every socket of the process: 512 buffers of 2 KiB (1 MiB, touched as used),
    /// some 8 ms of a replay of 1,000 stations; an IMU message of `make run`'s recording is under 1 KiB.
    static let shared = SendBuffers(count: 512, bytes: 2_048)

    /// How many buffers, a power of two.
    let count: Int
    /// The longest frame a buffer holds.
    let bytes: Int
    /// Frames this short libzmq keeps inside the message itself (no allocation to save).
    static let inlineBytes = 33
    private let memory: UnsafeMutableRawPointer
    /// Whether each buffer is libzmq's: set on sending, cleared by `release` on the I/O thread.
    private let held: UnsafeMutablePointer<Atomic<Bool>>
    private let next = Atomic<Int>(0)

    init(count: Int, bytes: Int) {
        precondition(count > 0 && count & (count - 1) == 0, "the count of buffers is a power of two")
        self.count = count
        self.bytes = bytes
        memory = UnsafeMutableRawPointer.allocate(byteCount: count * bytes, alignment: 64)
        held = UnsafeMutablePointer<Atomic<Bool>>.allocate(capacity: count)
        for index in 0..<count { (held + index).initialize(to: Atomic(false)) }
        // Never deallocated: libzmq may hold a frame until its context ends, and the shared
        // pool lives as long as the process.
    }

    /// Sends `frame` from a buffer with `flags`: libzmq's result and errno, or nil when the
    /// frame is not worth a buffer or the next one is still held (the caller sends it itself).
    func send(_ frame: UnsafeRawBufferPointer, socket: UnsafeMutableRawPointer, flags: Int32) -> (result: Int32, errno: Int32)? {
        guard frame.count > Self.inlineBytes, frame.count <= bytes, let source = frame.baseAddress else { return nil }
        let index = next.wrappingAdd(1, ordering: .relaxed).oldValue & (count - 1)
        guard held[index].compareExchange(expected: false, desired: true, ordering: .acquiring).exchanged else { return nil }
        let buffer = memory + index * bytes
        buffer.copyMemory(from: source, byteCount: frame.count)
        var msg = zmq_msg_t()
        guard zmq_msg_init_data(&msg, buffer, frame.count, sendBufferReleased, UnsafeMutableRawPointer(held + index)) == 0 else {
            held[index].store(false, ordering: .releasing)
            return nil
        }
        let outcome = retryingInterrupts { zmq_msg_send(&msg, socket, flags) }
        // Not queued (EAGAIN under ZMQ_DONTWAIT, a closed context): closing gives the buffer back.
        if outcome.result < 0 { zmq_msg_close(&msg) }
        return outcome
    }

    /// How many buffers libzmq holds now (for tests).
    var heldCount: Int { (0..<count).reduce(0) { $0 + (held[$1].load(ordering: .acquiring) ? 1 : 0) } }
}

/// libzmq's free function for a frame sent from a buffer (`zmq_free_fn`): the hint is the
/// buffer's held flag.
private func sendBufferReleased(_ data: UnsafeMutableRawPointer?, _ hint: UnsafeMutableRawPointer?) {
    hint?.assumingMemoryBound(to: Atomic<Bool>.self).pointee.store(false, ordering: .releasing)
}
