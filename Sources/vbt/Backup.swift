import ArgumentParser
import Foundation
import VBTQuery

// `vbt backup`: an online copy of the live history (proto/query.md, `backup`).

struct Backup: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Copy the live history database to a backup file, checked, while the recorder keeps recording.",
        discussion: """
            The session-recorder copies its database with SQLite's online backup into backups/ beside it
            (e.g. data/backups/NAME.sqlite): a consistent copy of everything stored before the backup began;
            messages arriving meanwhile wait and are stored after. The copy is checked (PRAGMA integrity_check)
            and its rows counted. An existing backup is never replaced. Needs a coach's or a service's key.
            To restore: stop the session-recorder, copy the backup over its database (VBT_DB, default
            data/vbt.sqlite; remove the -wal and -shm files beside it), start it again.
            """)

    @Argument(help: "The backup's name: letters, digits, '.', '_', '-' (\".sqlite\" is added without an extension).")
    var name: String

    @OptionGroup var recorder: RecorderOptions

    func run() throws {
        let result = try recorder.withClient { try $0.ask(.backup, BackupArgs(name: name), as: BackupResult.self) }
        recorder.output(result) {
            let rows = result.rows.keys.sorted().map { "\($0) \(result.rows[$0]!)" }.joined(separator: ", ")
            return "backup \(result.path): \(result.bytes) bytes, integrity \(result.integrity)\nrows: \(rows)\n"
        }
    }
}

/// `vbt set reassign`: a stored set attributed to the right athlete, exercise or load.
struct SetCommand: ParsableCommand {
    static let configuration = CommandConfiguration(commandName: "set", abstract: "Stored sets.", subcommands: [Reassign.self])

    struct Reassign: ParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Attribute a stored set and its reps to another athlete, exercise or load.",
            discussion: "For a set lifted before the station was assigned, or under the wrong athlete. The set's id is in vbt history --json.")
        @Argument(help: "The set's id.") var set: String
        @Option(help: "The athlete who lifted it.") var athlete: String?
        @Option(help: "The exercise.") var exercise: String?
        @Option(help: "The load, kg.") var load: Double?
        @OptionGroup var recorder: RecorderOptions

        func validate() throws {
            guard athlete != nil || exercise != nil || load != nil else { throw ValidationError("give --athlete, --exercise or --load") }
        }

        func run() throws {
            let summary = try recorder.withClient {
                try $0.ask(.setReassign, ReassignArgs(set: set, athlete: athlete, exercise: exercise, loadKg: load), as: SetSummary.self)
            }
            recorder.output(summary) {
                "set \(summary.id): \(summary.athlete ?? "-"), \(summary.exercise ?? "-")\(summary.loadKg.map { String(format: " at %g kg", $0) } ?? ""), \(summary.reps) reps\n"
            }
        }
    }
}
