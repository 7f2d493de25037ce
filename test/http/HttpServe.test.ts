import { assert, describe, it } from "@effect/vitest"
import { Effect, Exit, Layer, Scope, Stream } from "effect"
import * as HttpRouter from "effect/http/HttpRouter"
import * as HttpServerRequest from "effect/http/HttpServerRequest"
import * as HttpServerResponse from "effect/http/HttpServerResponse"
import * as NodeNet from "node:net"
import * as HttpServe from "../../src/http/HttpServe.ts"

const routes = Layer.mergeAll(
  HttpRouter.add("GET", "/hello", HttpServerResponse.text("hi")),
  HttpRouter.add(
    "POST",
    "/echo",
    Effect.flatMap(HttpServerRequest.HttpServerRequest, (request) =>
      request.text.pipe(
        Effect.map((text) => HttpServerResponse.text(`got ${text.length}`)),
        Effect.catch(() => Effect.succeed(HttpServerResponse.text("too large", { status: 413 })))
      ))
  ),
  // Never ends by itself: only the shutdown ends it.
  HttpRouter.add(
    "GET",
    "/forever",
    HttpServerResponse.stream(Stream.concat(Stream.make(new TextEncoder().encode("open\n")), Stream.never), {
      contentType: "text/plain"
    })
  )
)

/** Serves `routes` in a fresh scope; gives the base URL and the scope. */
const serveIn = (options: HttpServe.HttpServeOptions) =>
  Effect.gen(function*() {
    const scope = yield* Scope.make()
    const context = yield* Layer.buildWithScope(HttpServe.layer(routes, options), scope)
    const served = context.mapUnsafe.get(HttpServe.ServedUrl.key) as HttpServe.ServedUrl["Service"]
    return { url: served.url, port: served.port, scope }
  })

const fetchText = (url: string, init?: RequestInit) =>
  Effect.promise(async () => {
    const response = await fetch(url, init)
    return { status: response.status, body: await response.text() }
  })

describe("HttpServe", () => {
  it.live("serves on a picked port at the base URL it provides, and stops accepting when the scope closes", () =>
    Effect.gen(function*() {
      const { port, scope, url } = yield* serveIn({})
      assert.isAbove(port, 0)
      assert.strictEqual(url, `http://127.0.0.1:${port}`)
      assert.deepStrictEqual(yield* fetchText(`${url}/hello`), { status: 200, body: "hi" })
      assert.strictEqual((yield* fetchText(`${url}/nowhere`)).status, 404)
      yield* Scope.close(scope, Exit.void)
      const refused = yield* Effect.promise(() => fetch(`${url}/hello`).then(() => "answered", () => "refused"))
      assert.strictEqual(refused, "refused")
    }))

  it.live("with a token, refuses requests without the bearer and serves those with it", () =>
    Effect.gen(function*() {
      const { url } = yield* serveIn({ token: "s3cret" })
      assert.strictEqual((yield* fetchText(`${url}/hello`)).status, 401)
      assert.strictEqual((yield* fetchText(`${url}/hello`, { headers: { authorization: "Bearer wrong" } })).status, 401)
      assert.deepStrictEqual(
        yield* fetchText(`${url}/hello`, { headers: { authorization: "Bearer s3cret" } }),
        { status: 200, body: "hi" }
      )
    }))

  it.live("refuses a non-loopback host without a token, and bad options, before binding", () =>
    Effect.gen(function*() {
      const open = yield* Effect.flip(serveIn({ host: "0.0.0.0" }))
      assert.strictEqual(open.reason, "TokenRequired")
      const badPort = yield* Effect.flip(serveIn({ port: 70000 }))
      assert.strictEqual(badPort.reason, "InvalidOption")
      assert.isTrue(HttpServe.isLoopbackHost("127.0.0.1"))
      assert.isTrue(HttpServe.isLoopbackHost("::1"))
      assert.isFalse(HttpServe.isLoopbackHost("10.0.0.1"))
    }))

  it.live("a port in use fails with BindFailed", () =>
    Effect.gen(function*() {
      const { port } = yield* serveIn({})
      const taken = yield* Effect.flip(serveIn({ port }))
      assert.strictEqual(taken.reason, "BindFailed")
    }))

  it.live("refuses a body over the limit by its length before reading it, and a chunked one while reading", () =>
    Effect.gen(function*() {
      const { url } = yield* serveIn({ maxBodyBytes: 10 })
      assert.deepStrictEqual(yield* fetchText(`${url}/echo`, { method: "POST", body: "0123456789" }), {
        status: 200,
        body: "got 10"
      })
      const declared = yield* fetchText(`${url}/echo`, { method: "POST", body: "0123456789A" })
      assert.strictEqual(declared.status, 413)
      assert.match(declared.body, /exceeds the limit of 10/)
      const chunked = yield* fetchText(`${url}/echo`, {
        method: "POST",
        body: new ReadableStream({
          start(controller) {
            controller.enqueue(new TextEncoder().encode("0123456789"))
            controller.enqueue(new TextEncoder().encode("0123456789"))
            controller.close()
          }
        }),
        duplex: "half"
      } as RequestInit)
      assert.strictEqual(chunked.status, 413)
    }))

  it.live("closing the scope ends an open response within about the shutdown time", () =>
    Effect.gen(function*() {
      const { port, scope } = yield* serveIn({ shutdownMillis: 200 })
      const socket = NodeNet.connect(port, "127.0.0.1")
      const ended = new Promise<void>((resolve) => socket.on("close", () => resolve()))
      const headers = new Promise<void>((resolve) => socket.once("data", () => resolve()))
      socket.write("GET /forever HTTP/1.1\r\nHost: x\r\n\r\n")
      yield* Effect.promise(() => headers)
      yield* Scope.close(scope, Exit.void)
      // The scope closed only after the open connection was cut.
      yield* Effect.promise(() => ended)
      assert.isTrue(socket.destroyed)
    }))
})
