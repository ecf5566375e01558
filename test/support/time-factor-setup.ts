import { refreshTimeFactor } from "./time-factor.js";

// Before each test file: the load now, not when the worker started (see refreshTimeFactor).
refreshTimeFactor();
