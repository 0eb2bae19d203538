import Foundation
import Testing

@testable import VBTConsole

private func displaysPath() -> String {
    let folder = NSTemporaryDirectory() + "vbt-phones-" + UUID().uuidString
    try! FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
    return folder + "/console-users.displays"
}

@Suite struct PhonesTests {
    @Test func aPhonePairsOnceForItsAthleteAndIsKeptHashed() throws {
        let path = displaysPath()
        let (rack, _) = try DisplaysFile.add(path: path, station: "rack-01")
        let (phone, code) = try DisplaysFile.add(path: path, athlete: "ana")
        #expect(phone.athlete == "ana" && phone.station == nil && phone.purpose == "phone of ana")
        #expect(rack.station == "rack-01" && rack.athlete == nil && rack.purpose == "rack-01")
        let text = try String(contentsOfFile: path, encoding: .utf8)
        #expect(!text.contains(code) && text.contains("phone:\(phone.id):ana:$2") && text.contains("display:\(rack.id):rack-01:$2"))

        let book = try DisplayBook(path: path)
        let paired = try #require(book.pair(code: code, monotonic: 1))
        #expect(paired.0.id == phone.id && paired.0.scope == .athlete("ana") && paired.0.isPaired)
        #expect(book.pair(code: code, monotonic: 2) == nil, "a code pairs once")
        // A console started again finds the phone, and its athlete, in the file.
        let again = try DisplayBook(path: path)
        #expect(again.display(token: paired.1)?.scope == .athlete("ana"))
        let secret = try String(contentsOfFile: path, encoding: .utf8)
        #expect(!secret.contains(String(paired.1.split(separator: ".")[1])), "the session secret is kept hashed")
    }

    @Test func aPhoneIsRemovedByItsAthleteItsIdOrItsCodeButNeverByAStation() throws {
        let path = displaysPath()
        let (rack, _) = try DisplaysFile.add(path: path, station: "ana")  // a station that happens to share the athlete's id
        let (first, _) = try DisplaysFile.add(path: path, athlete: "ana")
        let (second, code) = try DisplaysFile.add(path: path, athlete: "ana")
        let (ben, _) = try DisplaysFile.add(path: path, athlete: "ben")
        #expect(try DisplaysFile.remove(path: path, code).map(\.id) == [second.id], "by its code")
        #expect(try DisplaysFile.remove(path: path, id: ben.id)?.id == ben.id, "by its id")
        #expect(try DisplaysFile.remove(path: path, id: ben.id) == nil)
        #expect(try DisplaysFile.remove(path: path, athlete: "ana").map(\.id) == [first.id], "every phone of ana, not the station ana")
        #expect(try DisplaysFile.load(path: path).map(\.id) == [rack.id])
        #expect(try DisplaysFile.remove(path: path, "ana").map(\.id) == [rack.id], "the station")
    }

    @Test func aRemovedPhonesSessionAndPageTokenEnd() throws {
        let path = displaysPath()
        let (phone, code) = try DisplaysFile.add(path: path, athlete: "ana")
        let book = try DisplayBook(path: path)
        let (_, token) = try #require(book.pair(code: code, monotonic: 1))
        let pageToken = book.pageToken(id: phone.id)
        #expect(pageToken.count == 64 && book.pageToken(id: phone.id) == pageToken, "one token per phone and console run")
        #expect(book.cached(token: token)?.athlete == "ana")
        _ = try DisplaysFile.remove(path: path, athlete: "ana")
        #expect(book.cached(token: token) == nil && book.display(token: token) == nil && !book.isPaired(id: phone.id))
        #expect(book.pageToken(id: phone.id) != pageToken, "the removed phone's token was forgotten")
    }

    @Test func anAthletesIdIsCheckedAsAnAccountsIs() throws {
        let path = displaysPath()
        for bad in ["", "a:b", "a\nb", " ana", String(repeating: "a", count: 65)] {
            #expect(throws: AccountError.self, "\(bad.debugDescription)") { try DisplaysFile.add(path: path, athlete: bad) }
            #expect(throws: AccountError.self) { try AccountsFile.validate(athlete: bad) }
        }
        #expect(!FileManager.default.fileExists(atPath: path), "nothing written for a bad id")
        _ = try DisplaysFile.add(path: path, athlete: "ana-maría.2")
        #expect(try DisplaysFile.load(path: path).first?.athlete == "ana-maría.2")
    }

    @Test func aFileOfRackDisplaysAloneReadsAsBefore() throws {
        let hash = "$2b$10$abcdefghijklmnopqrstuuABCDEFGHIJKLMNOPQRSTUVWXYZ01234"
        let displays = try DisplaysFile.parse(
            """
            # an older file
            display:0000000a:rack-01:\(hash):-:1000:-
            phone:0000000b:ana:\(hash):\(hash):1000:1001
            """)
        #expect(displays.map(\.scope) == [.station("rack-01"), .athlete("ana")])
        #expect(displays[1].pairedAt == 1_001 && displays[0].secretHash == nil)
        #expect(throws: AccountError.self) { try DisplaysFile.parse("tablet:0000000c:x:\(hash):-:1000:-") }
        #expect(throws: AccountError.self) { try DisplaysFile.parse("phone:0000000c::\(hash):-:1000:-") }
    }
}
