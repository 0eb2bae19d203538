import VBTBus
import VBTDetection

/// The rep-detector's pattern library survives restarts in a JSON file (`--patterns`), saved
/// atomically and read back as an empty library when there is no file yet.
extension PatternLibrary: JSONFileStored {}
