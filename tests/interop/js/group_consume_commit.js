// A kafkajs consumer group reads N messages, commits the next offset of
// every partition it read, and prints what it read and what
// admin.fetchOffsets returns for the group, as JSON.
//   node group_consume_commit.js BOOTSTRAP GROUP TOPIC N
const { Kafka, logLevel } = require('kafkajs')
const [bootstrap, group, topic, nArg] = process.argv.slice(2)
const n = Number(nArg)

async function main () {
  const kafka = new Kafka({ clientId: 'kcoord-interop-js', brokers: bootstrap.split(','), logLevel: logLevel.WARN })
  const consumer = kafka.consumer({ groupId: group, sessionTimeout: 6000, heartbeatInterval: 500 })
  await consumer.connect()
  await consumer.subscribe({ topics: [topic], fromBeginning: true })
  const messages = []
  const next = {}
  await new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`timed out after ${messages.length} messages`)), 90000)
    consumer.run({
      autoCommit: false,
      eachMessage: async ({ partition, message }) => {
        messages.push({ partition, offset: Number(message.offset), key: message.key.toString() })
        next[partition] = Math.max(next[partition] || 0, Number(message.offset) + 1)
        if (messages.length === n) {
          await consumer.commitOffsets(Object.entries(next).map(([p, o]) => ({ topic, partition: Number(p), offset: String(o) })))
          clearTimeout(timer)
          resolve()
        }
      }
    }).catch(reject)
  })
  await consumer.disconnect()
  const admin = kafka.admin()
  await admin.connect()
  const offsets = await admin.fetchOffsets({ groupId: group, topics: [topic] })
  await admin.disconnect()
  const fetched = offsets[0].partitions.map(p => ({ partition: p.partition, offset: Number(p.offset) }))
  fetched.sort((a, b) => a.partition - b.partition)
  console.log(JSON.stringify({ messages, committed: next, fetched }))
}

main().catch(e => { console.error(e); process.exit(1) })
