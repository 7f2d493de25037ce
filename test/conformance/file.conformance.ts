import { conformance } from "./serve.ts"

conformance("file")
