import { conformance } from "./serve.ts"

conformance("postgres")
