// Produces N keyed messages to a topic, then consumes them back with a
// consumer group; prints what was consumed as JSON.
//   node produce_consume.js BROKER TOPIC N GROUP IDEMPOTENT(0|1)
const { Kafka, logLevel, Partitioners } = require('kafkajs')

async function main () {
  const [broker, topic, nArg, group, idempotent] = process.argv.slice(2)
  const n = Number(nArg)
  const prefix = topic
  const kafka = new Kafka({ clientId: 'kcoord-interop', brokers: [broker], logLevel: logLevel.WARN })
  const producer = kafka.producer({
    createPartitioner: Partitioners.DefaultPartitioner,
    idempotent: idempotent === '1',
    maxInFlightRequests: idempotent === '1' ? 1 : undefined
  })
  await producer.connect()
  const batch = []
  for (let i = 0; i < n; i++) batch.push({ key: `${prefix}-k${i}`, value: `${prefix}-v${i}` })
  for (let i = 0; i < n; i += 100) {
    await producer.send({ topic, acks: -1, messages: batch.slice(i, i + 100) })
  }
  await producer.disconnect()

  const consumer = kafka.consumer({ groupId: group, sessionTimeout: 6000, heartbeatInterval: 1000 })
  await consumer.connect()
  await consumer.subscribe({ topic, fromBeginning: true })
  const messages = []
  let finished
  const done = new Promise(resolve => { finished = resolve })
  await consumer.run({
    eachMessage: async ({ partition, message }) => {
      messages.push({ partition, offset: message.offset, key: message.key.toString(), value: message.value.toString() })
      if (messages.length >= n) finished()
    }
  })
  const timer = setTimeout(finished, 90000)
  await done
  clearTimeout(timer)
  await consumer.disconnect()
  console.log(JSON.stringify({ messages }))
}

main().catch(e => { console.error(e); process.exit(1) })
