import PackagePlugin

/// Compiles the target's `.js` and `.css` files into one Swift file of strings (`Assets.consoleJS`, ...)
/// through the embed-assets tool, rebuilt whenever one of them changes. The files are the source:
/// `make lint` checks them (scripts/lint-assets.sh); the program serves them from its binary.
@main
struct EmbedAssets: BuildToolPlugin {
    func createBuildCommands(context: PluginContext, target: any Target) throws -> [Command] {
        guard let target = target as? SourceModuleTarget else { return [] }
        let assets = target.sourceFiles.map(\.url).filter { ["js", "css"].contains($0.pathExtension) }.sorted { $0.path < $1.path }
        guard !assets.isEmpty else { return [] }
        let output = context.pluginWorkDirectoryURL.appendingPathComponent("EmbeddedAssets.swift")
        return [
            .buildCommand(
                displayName: "Embedding \(target.name)'s \(assets.count) assets",
                executable: try context.tool(named: "embed-assets").url,
                arguments: [output.path] + assets.map(\.path),
                inputFiles: assets,
                outputFiles: [output]
            )
        ]
    }
}
