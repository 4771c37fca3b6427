// kafkajs commits and resumption: `commit` consumes 10 messages, commits
// offset 10 and prints what admin.fetchOffsets returns; `resume` prints the
// offset of the first message a new consumer of the group receives.
const { Kafka, logLevel } = require('kafkajs')
const [bootstrap, group, topic, phase] = process.argv.slice(2)

async function main () {
  const kafka = new Kafka({ clientId: 'kcoord-interop-js', brokers: [bootstrap], logLevel: logLevel.WARN })
  const consumer = kafka.consumer({ groupId: group, sessionTimeout: 6000, heartbeatInterval: 500 })
  await consumer.connect()
  await consumer.subscribe({ topics: [topic], fromBeginning: true })
  const result = {}
  await new Promise((resolve, reject) => {
    let seen = 0
    consumer.run({
      autoCommit: false,
      eachMessage: async ({ partition, message }) => {
        if (phase === 'resume') {
          if (result.first === undefined) { result.first = Number(message.offset); resolve() }
          return
        }
        seen += 1
        if (seen === 10) {
          await consumer.commitOffsets([{ topic, partition, offset: '10' }])
          resolve()
        }
      }
    }).catch(reject)
    setTimeout(() => reject(new Error('timed out')), 60000)
  })
  await consumer.disconnect()
  if (phase === 'commit') {
    const admin = kafka.admin()
    await admin.connect()
    const offsets = await admin.fetchOffsets({ groupId: group, topics: [topic] })
    result.fetched = offsets[0].partitions.map(p => ({ partition: p.partition, offset: Number(p.offset) }))
    await admin.disconnect()
  }
  console.log(JSON.stringify(result))
}

main().catch(e => { console.error(e); process.exit(1) })
