// embed-assets OUTPUT FILE...: writes OUTPUT, a Swift file declaring `enum Assets` with one
// `static let` string per FILE, named after it (console.js -> `consoleJS`, rack-sound.css ->
// `rackSoundCSS`). The EmbedAssets plugin runs it at build time, so a program serves its script
// and style sheet from its own binary: an installed program needs no resource folder.
//
// A string holds its file's text without the newline that ends the last line, as a Swift
// multiline literal would (the files end with one; what is served does not). The text is
// written verbatim into a raw string literal with more `#`s than any run in it, so nothing in
// it is read as an escape, an interpolation or the literal's end.
import Foundation

func fail(_ message: String) -> Never {
    FileHandle.standardError.write(Data("embed-assets: \(message)\n".utf8))
    exit(1)
}

/// console.js -> consoleJS: the base name's words in lower camel case, then the extension in capitals.
func propertyName(_ url: URL) -> String {
    let words = url.deletingPathExtension().lastPathComponent.split { !($0.isLetter || $0.isNumber) }
    let camel = words.enumerated().map { $0.offset == 0 ? $0.element.lowercased() : $0.element.prefix(1).uppercased() + $0.element.dropFirst() }
    let name = camel.joined() + url.pathExtension.uppercased()
    guard let first = name.first, first.isLetter, name.allSatisfy({ $0.isASCII && ($0.isLetter || $0.isNumber) }) else {
        fail("\(url.path) gives no Swift name (\(name)): name it with ASCII letters and digits, starting with a letter")
    }
    return name
}

/// The literal of `text`: a raw multiline string whose delimiters carry one `#` more than the longest run in it.
func literal(_ text: String) -> String {
    if text.isEmpty { return "\"\"" }
    var longest = 0
    var run = 0
    for character in text {
        run = character == "#" ? run + 1 : 0
        longest = max(longest, run)
    }
    let hashes = String(repeating: "#", count: longest + 1)
    return hashes + "\"\"\"\n" + text + "\n\"\"\"" + hashes
}

let arguments = CommandLine.arguments.dropFirst()
guard let outputPath = arguments.first, arguments.count > 1 else { fail("usage: embed-assets OUTPUT FILE...") }
var names: [String: String] = [:]
var source = "// Written by embed-assets (Plugins/embed-assets) from the files named below: edit those, not this.\n\nenum Assets {\n"
for path in arguments.dropFirst() {
    let url = URL(fileURLWithPath: path)
    let name = propertyName(url)
    if let other = names[name] { fail("\(path) and \(other) would both be Assets.\(name): rename one") }
    names[name] = path
    guard let data = FileManager.default.contents(atPath: path) else { fail("cannot read \(path)") }
    guard var text = String(validating: data, as: UTF8.self) else { fail("\(path) is not UTF-8 text: save it as UTF-8") }
    if text.contains("\r") { fail("\(path) has carriage returns: save it with LF line endings") }
    if text.unicodeScalars.contains(where: { $0.value < 0x20 && $0 != "\n" && $0 != "\t" }) {
        fail("\(path) holds a control character other than a tab or a newline: remove it")
    }
    if text.hasSuffix("\n") { text.removeLast() }
    source += "    /// \(url.lastPathComponent)\n    static let \(name) = \(literal(text))\n"
}
source += "}\n"
do {
    try Data(source.utf8).write(to: URL(fileURLWithPath: outputPath), options: .atomic)
} catch {
    fail("cannot write \(outputPath): \(error)")
}
