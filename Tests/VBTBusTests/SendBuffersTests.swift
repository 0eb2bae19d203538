import CZeroMQ
import Foundation
import Testing

@testable import VBTBus

/// `SendBuffers` over real libzmq sockets on loopback: frames sent from a buffer arrive as
/// sent, libzmq gives each buffer back once it is done with the frame, and a frame that finds
/// no free buffer is left to the usual send.
@Suite("Send buffers")
struct SendBuffersTests {
    /// Waits (bounded) until `condition` holds; whether it did.
    private func eventually(_ condition: () -> Bool) -> Bool {
        let deadline = Date().addingTimeInterval(10)
        while !condition() {
            if Date() > deadline { return false }
            usleep(1_000)
        }
        return true
    }

    @Test("frames sent from buffers arrive byte for byte, and every buffer is given back")
    func roundTrip() throws {
        let context = ZMQContext()
        let pull = try ZMQSocket(context, .pull, lingerMs: 0)
        try pull.bind("tcp://127.0.0.1:0")
        let push = try ZMQSocket(context, .push, lingerMs: 0)
        try push.connect(try pull.lastEndpoint())
        let pool = SendBuffers(count: 4, bytes: 256)
        // Lengths around the edges: kept inside the message (33), the first a buffer takes (34), a full buffer, one too long.
        let frames: [[UInt8]] = (0..<40).map { index in
            let length = [33, 34, 100, 256, 257][index % 5]
            return (0..<length).map { UInt8(truncatingIfNeeded: $0 &* 31 &+ index) }
        }
        var fromBuffers = 0
        for frame in frames {
            let outcome = frame.withUnsafeBytes { pool.send($0, socket: push.handle, flags: 0) }
            if let outcome {
                #expect(outcome.result == Int32(frame.count))
                fromBuffers += 1
            } else {
                try push.send(frame)
            }
            // Read as sent, so a buffer is free again by the next round of four.
            try pull.setReceiveTimeout(ms: 10_000)
            let received = try #require(try pull.receive(dontWait: false))
            #expect(received.frames == [frame])
        }
        #expect(fromBuffers >= 16, "the 34- to 256-byte frames went through buffers")
        #expect(eventually { pool.heldCount == 0 }, "libzmq gave every buffer back")
        push.close()
        pull.close()
    }

    @Test("a frame that finds every buffer held is not taken, and closing the socket gives them back")
    func fallsBackWhenHeld() throws {
        let context = ZMQContext()
        let push = try ZMQSocket(context, .push, lingerMs: 0)
        // Nobody listens there (a socket file never made): libzmq queues what is sent, up to its
        // high-water mark, and holds the frames.
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("send-buffers-\(UUID().uuidString)")
        try push.connect("ipc://\(folder.path)/nobody")
        let pool = SendBuffers(count: 2, bytes: 128)
        let frame = [UInt8](repeating: 7, count: 64)
        for _ in 0..<2 {
            let outcome = frame.withUnsafeBytes { pool.send($0, socket: push.handle, flags: ZMQ_DONTWAIT) }
            #expect(outcome?.result == 64)
        }
        #expect(pool.heldCount == 2)
        #expect(frame.withUnsafeBytes { pool.send($0, socket: push.handle, flags: ZMQ_DONTWAIT) } == nil, "no free buffer: the caller sends it")
        push.close()
        #expect(eventually { pool.heldCount == 0 }, "the queued frames were dropped with the socket and their buffers given back")
    }
}
