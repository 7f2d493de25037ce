import { conformance } from "./serve.ts"

conformance("sqlite")
