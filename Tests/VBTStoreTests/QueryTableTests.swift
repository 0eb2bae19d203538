import Foundation
import Testing

@testable import VBTQuery
@testable import VBTStore

@Suite("Typed queries: one declaration and one handler per name")
struct QueryTableTests {
    /// Asks `service` as `QueryClient` would: the request encoded from the typed query, the reply decoded as its result.
    func ask<A, R>(_ service: QueryService, _ query: Query<A, R>, _ args: A) throws -> R {
        let request = try JSONEncoder().encode(QueryRequest(id: "t", query: query.name.rawValue, args: args))
        return try QueryClient.decode(service.handle(request), of: query)
    }

    @Test("every query name is served by exactly one handler built from its typed declaration")
    func everyNameOnce() {
        let served = Dictionary(QueryService.table.map { ($0.name, 1) }, uniquingKeysWith: +)
        for name in QueryName.allCases {
            #expect(served[name] == 1, "\(name.rawValue) is served \(served[name] ?? 0) times")
        }
        #expect(QueryService.table.count == QueryName.allCases.count)
        #expect(Set(QueryService.handlers.keys) == Set(QueryName.allCases))
    }

    @Test("typed questions get typed answers, optional results included")
    func roundTrip() throws {
        let folder = TempFolder()
        let service = QueryService(store: try makeStore(folder))
        let added = try ask(service, .athleteAdd, AthleteInput(id: "ana", name: "Ana"))
        #expect(added.id == "ana")
        #expect(try ask(service, .athleteList, AthleteListArgs()).map(\.id) == ["ana"])
        #expect(try ask(service, .athleteShow, IdArgs(id: "ana")).name == "Ana")
        #expect(try ask(service, .assignmentGet, StationArgs(station: "rack-01")) == nil)
        #expect(try ask(service, .calibrationGet, AthleteArgs(athlete: "ana")) == nil)
        #expect(try ask(service, .history, HistoryArgs(athlete: "ana")).isEmpty)
        // The recorder's refusal comes back as its error, not as a decoding failure.
        let refused = #expect(throws: QueryError.self) { try ask(service, .athleteShow, IdArgs(id: "zed")) }
        #expect(refused?.kind == "invalid")
        // A reply read as another query's result fails as a bad reply.
        let reply = service.handle(Data(#"{"id":"x","query":"athlete.list"}"#.utf8))
        let misread = #expect(throws: QueryError.self) { try QueryClient.decode(reply, of: .status) }
        #expect(misread?.kind == "bad-reply")
    }

    @Test("a query that takes no arguments does not read them; one that may omit them checks them when given")
    func argumentRules() throws {
        let folder = TempFolder()
        let service = QueryService(store: try makeStore(folder))
        let unread = try #require(JSONSerialization.jsonObject(with: service.handle(Data(#"{"query":"plan.list","args":5}"#.utf8))) as? [String: Any])
        #expect(unread["ok"] as? Bool == true)
        let checked = try #require(
            JSONSerialization.jsonObject(with: service.handle(Data(#"{"query":"pattern.list","args":{"exercise":5}}"#.utf8))) as? [String: Any])
        #expect(checked["ok"] as? Bool == false)
        #expect(
            ((checked["error"] as? [String: Any])?["message"] as? String)?.hasPrefix("arguments of pattern.list do not fit: exercise has the wrong type")
                == true)
    }
}
