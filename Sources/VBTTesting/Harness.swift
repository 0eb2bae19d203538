import VBTBus
