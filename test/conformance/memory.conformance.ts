import { conformance } from "./serve.ts"

conformance("memory")
